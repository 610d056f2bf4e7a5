# In-lab test (shape smt: 2 nodes x 2 cores x 2 threads). one-to-one mode:
# - a 2-vCPU guest without vNUMA: each vCPU pinned to one CPU, on two
#   different physical cores, memory not bound (seed 000), as planned;
# - a guest with threads=2 and two guest nodes: vCPUs 2k, 2k+1 on the two
#   siblings of one core, memory bound per guest node, as planned (node 0's
#   cores are all taken by the first VM, so both guest nodes share node 1);
# - every core is then dedicated: a third one-to-one guest does not fit,
#   fails with one line, and leaves no QEMU behind.
. "$QP_LAB_SRC/lib.sh"

expect_nodes 2
assert_eq "SMT siblings of CPU 0" 0-1 "$(cpu_siblings 0)"
qp_require --mode=one-to-one
write_fw_halt fw.bin

# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args o2o1 fw.bin) -smp 2 -m 128
qp_plan --mode=one-to-one -- "$@" >plan1.json || fail "qemu-pin plan failed: $(cat plan1.json)"
assert_eq "plan mode" one-to-one "$(plan_mode plan1.json)"
c0=$(jq -r '.vcpus[0].cpus' plan1.json)
c1=$(jq -r '.vcpus[1].cpus' plan1.json)
assert_eq "plan: vCPU 0 has one CPU" 1 "$(list_expand "$c0" | wc -w)"
assert_eq "plan: vCPU 1 has one CPU" 1 "$(list_expand "$c1" | wc -w)"
[ "$(cpu_siblings "$c0")" != "$(cpu_siblings "$c1")" ] \
  || fail "plan puts vCPUs 0 and 1 on SMT siblings $c0 and $c1 of one core"
log "ok: plan: vCPUs 0 and 1 on CPUs $c0 and $c1, cores $(cpu_siblings "$c0") and $(cpu_siblings "$c1")"
assert_eq "plan: memory not bound without vNUMA" null "$(jq -r '.["memory-nodes"]' plan1.json)"
pid1=$(qp_launch o2o1 --mode=one-to-one -- "$@") || fail "qemu-pin did not launch the first VM: $pid1"
check_vm_or_fail "one-to-one VM without vNUMA" plan1.json "$pid1"
check_detects_breakage plan1.json "$pid1"

# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args o2o2 fw.bin) -smp 4,sockets=2,cores=1,threads=2 -m 320 \
  -object memory-backend-ram,id=g0,size=128M -object memory-backend-ram,id=g1,size=192M \
  -numa node,nodeid=0,cpus=0-1,memdev=g0 -numa node,nodeid=1,cpus=2-3,memdev=g1
qp_plan --mode=one-to-one -- "$@" >plan2.json || fail "qemu-pin plan failed: $(cat plan2.json)"
for k in 0 2; do
  a=$(jq -r ".vcpus[$k].cpus" plan2.json)
  b=$(jq -r ".vcpus[$((k + 1))].cpus" plan2.json)
  [ "$a" != "$b" ] && [ "$(cpu_siblings "$a")" = "$(cpu_siblings "$b")" ] \
    || fail "plan: vCPUs $k and $((k + 1)) of a threads=2 guest are on CPUs $a and $b, not two siblings of one core"
  log "ok: plan: vCPUs $k,$((k + 1)) on siblings $a,$b (node $(cpu_node "$a"))"
done
# Both guest nodes on node 1 is worse than numa placement promises: the
# launch says so in one warning line.
QP_LAB_WARNING="shares host node"
pid2=$(qp_launch o2o2 --mode=one-to-one -- "$@") || fail "qemu-pin did not launch the second VM: $pid2"
QP_LAB_WARNING=
check_vm_or_fail "one-to-one VM with threads=2 and vNUMA" plan2.json "$pid2"

# Four cores, all dedicated now.
before=$(qemu_pids | wc -l)
# shellcheck disable=SC2046
if "$QP_BINARY" --mode=one-to-one -- "$QP_QEMU" $(vm_args o2o3 fw.bin) -smp 2 -m 128 \
     -daemonize -pidfile o2o3.pid >o2o3.out 2>&1; then
  fail "a third one-to-one VM started although every core is dedicated"
fi
log "ok: the third VM is refused: $(head -n 1 o2o3.out)"
assert_eq "lines qemu-pin printed for the refusal" 1 "$(wc -l <o2o3.out)"
assert_eq "QEMU processes after the refusal" "$before" "$(qemu_pids | wc -l)"
lab_cleanup
exit 0
