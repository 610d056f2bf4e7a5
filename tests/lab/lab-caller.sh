# In-lab test (shape 4n): the caller's own placement on a multi-node host.
# 1. A guest without vNUMA whose RAM backend the caller bound to the last
#    node (libvirt's <numatune mode='strict' nodeset=N> without NUMA cells
#    gives host-nodes=[N] on -machine memory-backend=): on an empty host
#    balanced would take node 0; the plan keeps the caller's node, the
#    memory is bound there, `qemu-pin status` shows it claimed there, and
#    the vCPUs float on that node's CPUs.
# 2. A one-to-one guest of 2 vCPUs: the caller moves vCPU 0 to a CPU of
#    another node (taskset -p, as virsh vcpupin does). The keeper keeps it
#    there, gives back vCPU 0's core and counts it as a shared vCPU on that
#    node; a reset to every CPU brings the plan and the core back, and so
#    does the caller putting it back on its own CPU by hand.
. "$QP_LAB_SRC/lib.sh"

expect_nodes 4
qp_require --mode=balanced
write_fw_halt fw.bin
last=3
ram="{\"qom-type\":\"memory-backend-ram\",\"id\":\"pc.ram\",\"size\":268435456,\"host-nodes\":[$last],\"policy\":\"bind\"}"

# 1. The caller's memory binding.
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args mem fw.bin) -smp 2 -object "$ram" -machine memory-backend=pc.ram
qp_plan --mode=balanced -- "$@" >mem.json || fail "qemu-pin plan failed: $(cat mem.json)"
assert_eq "plan: host nodes" "$last" "$(jq -r '.["host-nodes"]' mem.json)"
assert_eq "plan: the memory is the caller's" "true $last" \
  "$(jq -r '.memory[0] | "\(.["caller-set"]) \(.["host-nodes"])"' mem.json)"
pid=$(qp_launch mem --mode=balanced -- "$@") || fail "qemu-pin did not launch the VM"
assert_eq "guest RAM mapping" "256 bind:$last" "$(numa_maps_bind_nodes "$pid" | grep '^256 ')"
vcpu_threads "$pid" >mem.vcpus
while read -r _i tid; do
  assert_eq "vCPU $_i floats on node $last" "$(node_cpus "$last")" "$(cpus_allowed_of "$tid")"
done <mem.vcpus
sf=$(status_json) || fail "qemu-pin status --json failed"
assert_eq "claimed on node $last" "{\"$last\":256}" \
  "$(jq -c --argjson p "$pid" '.vms[] | select(.["qemu-pid"] == $p) | .["memory-mib"]' "$sf")"

# 2. The caller moves a one-to-one vCPU.
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args o2o fw.bin) -smp 2 -m 64
qp_plan --mode=one-to-one -- "$@" >o2o.json || fail "qemu-pin plan failed: $(cat o2o.json)"
all=$(jq -r '.claims["dedicated-cpus"]' o2o.json)
cpu0=$(jq -r '.vcpus[] | select(.index == 0) | .cpus' o2o.json)
pid2=$(qp_launch o2o --mode=one-to-one -- "$@") || fail "qemu-pin did not launch the one-to-one VM"
# A CPU of a node other than vCPU 0's, on none of the VM's cores.
node0=$(cpu_node "$cpu0")
other='' othernode=''
for n in 3 2 1 0; do
  [ "$n" = "$node0" ] && continue
  other=$(list_outside "$all" "$(node_cpus "$n")")
  [ -n "$other" ] && { othernode=$n; break; }
done
[ -n "$other" ] || fail "no CPU outside the VM's cores $all on another node"
# The claim once vCPU 0 left its core: the VM's cores less that core.
left=
for c in $(list_expand "$all"); do
  [ -z "$(list_outside "$(cpu_siblings "$cpu0")" "$c")" ] || left="$left $c"
done
left=$(list_canon "$left")

# o2o_claim: '["DEDICATED",{LOAD}]' of the one-to-one VM in qemu-pin status.
o2o_claim() {
  _sf=$(status_json) || return 1
  jq -c --argjson p "$pid2" '.vms[] | select(.["qemu-pid"] == $p) | [.["dedicated-cpus"], .load]' "$_sf"
}
claim_is() { [ "$(o2o_claim)" = "$1" ]; }
vcpu0_on() { [ "$(cpus_allowed_of "$tid0")" = "$1" ]; }

tid0=$(vcpu_threads "$pid2" | awk '$1 == 0 { print $2 }')
taskset -pc "$other" "$tid0" >/dev/null || fail "taskset -p -c $other $tid0 failed"
want="[\"$left\",{\"$othernode\":1}]"
wait_for 60 claim_is "$want" ||
  fail "claim after the caller moved vCPU 0 to CPU $other: expected $want, got $(o2o_claim)"
log "ok: the claim follows the caller: $(o2o_claim)"
assert_eq "vCPU 0 stays where the caller put it" "$other" "$(cpus_allowed_of "$tid0")"

# A reset to every CPU: the plan and the core come back.
taskset -pc "$(cat /sys/devices/system/cpu/online)" "$tid0" >/dev/null
wait_for 60 vcpu0_on "$cpu0" ||
  fail "vCPU 0 is on $(cpus_allowed_of "$tid0") after a reset, not on the plan's $cpu0"
want="[\"$all\",{}]"
wait_for 60 claim_is "$want" || fail "claim after the reset: expected $want, got $(o2o_claim)"
log "ok: the plan and its core are back: $(o2o_claim)"

# Moved away once more, then put back on its own CPU by hand (taskset -p,
# virsh vcpupin with the plan's CPU), not reset: it runs on its core, which
# is claimed again (it was left given back, free for another VM's plan).
taskset -pc "$other" "$tid0" >/dev/null || fail "taskset -p -c $other $tid0 failed"
want="[\"$left\",{\"$othernode\":1}]"
wait_for 60 claim_is "$want" ||
  fail "claim after the caller moved vCPU 0 to CPU $other again: expected $want, got $(o2o_claim)"
taskset -pc "$cpu0" "$tid0" >/dev/null || fail "taskset -p -c $cpu0 $tid0 failed"
want="[\"$all\",{}]"
wait_for 60 claim_is "$want" ||
  fail "claim after the caller put vCPU 0 back on its CPU $cpu0: expected $want, got $(o2o_claim)"
log "ok: put back on its CPU by hand, its core is claimed again: $(o2o_claim)"
assert_eq "vCPU 0 on its CPU" "$cpu0" "$(cpus_allowed_of "$tid0")"
lab_cleanup
exit 0
