# In-lab test (shape 4n): a caller that confines qemu-pin before it runs.
# 1. `numactl --membind=2` (an inherited MPOL_BIND): QEMU alone keeps the
#    guest's memory on node 2; so does the plan, the binding (numa_maps) and
#    the claim. A `move` to another node is refused in one line naming the
#    nodes the memory may use, and the VM runs on.
# 2. `numactl --interleave=1,3`: the plan's memory is inside nodes 1 and 3.
# 3. A cgroup v2 cpuset (cpus of nodes 2-3, mems 2-3; what libvirt and
#    systemd's AllowedCPUs=/AllowedMemoryNodes= set before QEMU runs): a
#    one-to-one VM's vCPUs get their own CPUs inside it and its memory is
#    claimed there. When the cgroup's mems then shrink to node 3, a move back
#    to node 2 is refused in one line naming the nodes its memory may use.
# 4. A cgroup whose CPUs are node 1's and whose memory is node 3's.
. "$QP_LAB_SRC/lib.sh"

expect_nodes 4
qp_require --mode=balanced
write_fw_halt fw.bin
command -v numactl >/dev/null || skip "numactl is not installed"

# 1. An inherited memory binding.
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args mb fw.bin) -smp 2 -m 128 -mem-prealloc
numactl --membind=2 "$QP_BINARY" plan --mode=balanced -- "$@" >mb.json 2>mb.err ||
  fail "qemu-pin plan under numactl --membind=2 failed: $(cat mb.err)"
assert_eq "plan under numactl --membind=2: host nodes" 2 "$(jq -r '.["host-nodes"]' mb.json)"
pid=$(numactl --membind=2 "$QP_BINARY" --mode=balanced -- "$@" -daemonize -pidfile mb.pid 2>mb.out && cat mb.pid) ||
  fail "qemu-pin did not launch under numactl --membind=2: $(cat mb.out)"
echo "$pid" >>"$QP_LAB_SCRATCH/launched.pids"
[ ! -s mb.out ] || fail "a successful launch printed: $(cat mb.out)"
assert_eq "guest RAM under numactl --membind=2" "128 bind:2" "$(numa_maps_bind_nodes "$pid" | grep '^128 ')"
assert_eq "guest RAM pages on node 2 (permille)" 1000 "$(on_node "$pid" 2 128)"
assert_eq "claimed under numactl --membind=2" '{"2":128}' "$(claim_of "$pid")"
"$QP_BINARY" move mb --to-nodes=3 >mb-move.out 2>mb-move.err
assert_eq "move of the VM bound to node 2 by its caller: exit status" 1 $?
assert_eq "its refusal is one line" 1 "$(wc -l <mb-move.err)"
grep -q "^qemu-pin: move refused: the VM's memory may use host nodes 2 only .*: nodes 3 are outside them" mb-move.err ||
  fail "the refusal does not name the nodes the memory may use: $(cat mb-move.err)"
kill -0 "$pid" || fail "the VM is gone after a refused move"
assert_eq "claimed after the refused move" '{"2":128}' "$(claim_of "$pid")"
lab_cleanup

# 2. An inherited interleave policy.
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args il fw.bin) -smp 2 -m 128
numactl --interleave=1,3 "$QP_BINARY" plan --mode=balanced -- "$@" >il.json 2>il.err ||
  fail "qemu-pin plan under numactl --interleave=1,3 failed: $(cat il.err)"
hn=$(jq -r '.["host-nodes"]' il.json)
[ -n "$hn" ] && [ -z "$(list_outside 1,3 "$hn")" ] || fail "plan under numactl --interleave=1,3 on host nodes '$hn'"
log "ok: plan under numactl --interleave=1,3 on host nodes $hn"

# 3. A cgroup v2 cpuset.
cg=/sys/fs/cgroup/lab-confined
grep -qw cpuset /sys/fs/cgroup/cgroup.controllers 2>/dev/null || skip "no cgroup v2 cpuset controller"
echo +cpuset >/sys/fs/cgroup/cgroup.subtree_control || fail "cannot enable the cpuset controller"
mkdir -p "$cg" || fail "cannot make $cg"
cpus="$(node_cpus 2),$(node_cpus 3)"
echo "$cpus" >"$cg/cpuset.cpus" && echo 2-3 >"$cg/cpuset.mems" || fail "cannot set $cg's cpuset"
in_cg() { sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cg" "$@"; }
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args cg fw.bin) -smp 2 -m 128 -mem-prealloc
pid=$(in_cg "$QP_BINARY" --mode=one-to-one -- "$@" -daemonize -pidfile cg.pid 2>cg.out && cat cg.pid) ||
  fail "qemu-pin did not launch in cgroup cpuset $cpus/2-3: $(cat cg.out)"
echo "$pid" >>"$QP_LAB_SCRATCH/launched.pids"
[ ! -s cg.out ] || fail "a successful launch printed: $(cat cg.out)"
vcpu_threads "$pid" >cg.vcpus
seen=
while read -r _i tid; do
  c=$(cpus_allowed_of "$tid")
  case $c in *[,-]*) fail "one-to-one vCPU $_i floats on CPUs $c" ;; esac
  [ -z "$(list_outside "$cpus" "$c")" ] || fail "vCPU $_i on CPU $c, outside the cgroup's CPUs $cpus"
  case " $seen " in *" $c "*) fail "two vCPUs on CPU $c" ;; esac
  seen="$seen $c"
done <cg.vcpus
log "ok: one-to-one vCPUs on CPUs$seen, inside the cgroup's CPUs $cpus"
claim=$(claim_of "$pid")
case $claim in '{"2":128}'|'{"3":128}') log "ok: claimed $claim, inside the cgroup's mems" ;;
  *) fail "claimed $claim, expected 128 MiB on node 2 or 3" ;; esac
echo 3 >"$cg/cpuset.mems" || fail "cannot shrink $cg's cpuset.mems"
"$QP_BINARY" move cg --to-nodes=2 >cg-move.out 2>cg-move.err
assert_eq "move to a node the cgroup's mems left out: exit status" 1 $?
assert_eq "its refusal is one line" 1 "$(wc -l <cg-move.err)"
grep -q "^qemu-pin: move refused: the VM's memory may use host nodes 3 only .*: nodes 2 are outside them" cg-move.err ||
  fail "the refusal does not name the nodes the memory may use: $(cat cg-move.err)"
kill -0 "$pid" || fail "the VM is gone after a refused move"
lab_cleanup

# 4. CPUs of one node, memory of another (libvirt's <vcpu cpuset> with
#    <numatune mode='restrictive'>, systemd's AllowedCPUs= and
#    AllowedMemoryNodes=, numactl --physcpubind with --membind): QEMU alone
#    runs there, and so does a VM of mode auto, its vCPUs on the CPUs it may
#    use and its memory on the node it may use; numa mode, which keeps a
#    guest node's memory on its CPUs' node, refuses, saying why.
echo "$(node_cpus 1)" >"$cg/cpuset.cpus" && echo 3 >"$cg/cpuset.mems" || fail "cannot set $cg's cpuset"
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args split fw.bin) -smp 2 -m 128 -mem-prealloc
numactl --membind=3 --physcpubind="$(node_cpus 1)" "$QP_BINARY" plan -- "$@" >split-numactl.json 2>split-numactl.err ||
  fail "qemu-pin plan under numactl --membind=3 --physcpubind=$(node_cpus 1) failed: $(cat split-numactl.err)"
for m in auto balanced one-to-one; do
  in_cg "$QP_BINARY" plan --mode=$m -- "$@" >split-$m.json 2>split-$m.err ||
    fail "qemu-pin plan --mode=$m in cgroup cpuset $(node_cpus 1)/3 failed: $(cat split-$m.err)"
  assert_eq "plan --mode=$m, CPUs of node 1 and memory of node 3: process CPUs" "$(node_cpus 1)" "$(plan_process_cpus split-$m.json)"
done
# numa mode keeps a guest node's memory on its CPUs' node: refused, saying why.
in_cg "$QP_BINARY" plan --mode=numa -- "$@" >split-numa.json 2>split-numa.err &&
  fail "plan --mode=numa with CPUs of node 1 and memory of node 3 was not refused"
assert_eq "its refusal is one line" 1 "$(wc -l <split-numa.err)"
grep -q "node 1 has only 0 MiB uncommitted (its memory is outside the nodes this process may use" split-numa.err ||
  fail "the numa refusal does not say why node 1 has no memory: $(cat split-numa.err)"
pid=$(in_cg "$QP_BINARY" -- "$@" -daemonize -pidfile split.pid 2>split.out && cat split.pid) ||
  fail "qemu-pin did not launch in cgroup cpuset $(node_cpus 1)/3: $(cat split.out)"
echo "$pid" >>"$QP_LAB_SCRATCH/launched.pids"
vcpu_threads "$pid" >split.vcpus
while read -r _i tid; do
  c=$(cpus_allowed_of "$tid")
  [ -z "$(list_outside "$(node_cpus 1)" "$c")" ] || fail "vCPU $_i on CPUs $c, outside the cgroup's CPUs $(node_cpus 1)"
done <split.vcpus
log "ok: vCPUs inside the cgroup's CPUs $(node_cpus 1)"
assert_eq "guest RAM pages on node 3 (permille)" 1000 "$(on_node "$pid" 3 128)"
assert_eq "claimed with CPUs of node 1 and memory of node 3" '{"3":128}' "$(claim_of "$pid")"
"$QP_BINARY" move split --to-nodes=1 >split-move.out 2>split-move.err
assert_eq "move to the node of its CPUs, whose memory it may not use: exit status" 1 $?
grep -q "^qemu-pin: move refused: the VM's memory may use host nodes 3 only .*: nodes 1 are outside them" split-move.err ||
  fail "the refusal does not name the nodes the memory may use: $(cat split-move.err)"
lab_cleanup
rmdir "$cg" 2>/dev/null
exit 0
