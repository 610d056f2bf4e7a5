# In-lab test (shape cpuless: nodes 0 and 1 with CPUs, node 2 memory only).
# - balanced: a small guest goes to a node with CPUs, never to node 2 alone;
# - numa: a guest with a memory-only guest node is placed and runs as planned.
. "$QP_LAB_SRC/lib.sh"

expect_nodes 3
assert_eq "CPUs of node 2" "" "$(node_cpus 2)"
qp_require --mode=balanced
write_fw_halt fw.bin

# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args c1 fw.bin) -smp 2 -m 256
qp_plan --mode=balanced -- "$@" >plan1.json || fail "qemu-pin plan failed: $(cat plan1.json)"
hn=$(jq -r '.["host-nodes"]' plan1.json)
case $hn in 0|1) ;; *) fail "balanced 256 MiB guest planned on nodes '$hn', expected node 0 or 1" ;; esac
pid=$(qp_launch c1 --mode=balanced -- "$@") || fail "qemu-pin did not launch the balanced VM: $pid"
check_vm_or_fail "balanced VM on a host with a CPU-less node" plan1.json "$pid"
lab_cleanup

# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args c2 fw.bin) -smp 2 -m 320 \
  -object memory-backend-ram,id=g0,size=128M -object memory-backend-ram,id=g1,size=192M \
  -numa node,nodeid=0,cpus=0-1,memdev=g0 -numa node,nodeid=1,memdev=g1
qp_plan --mode=numa -- "$@" >plan2.json || fail "qemu-pin plan failed: $(cat plan2.json)"
log "plan: guest node 0 -> host nodes $(jq -r '.memory[] | select(.["guest-node"] == 0) | .["host-nodes"]' plan2.json)," \
  "memory-only guest node 1 -> host nodes $(jq -r '.memory[] | select(.["guest-node"] == 1) | .["host-nodes"]' plan2.json)"
for i in 0 1; do
  c=$(jq -r ".vcpus[$i].cpus" plan2.json)
  [ -n "$c" ] && [ -z "$(list_outside 0-3 "$c")" ] || fail "plan: vCPU $i on CPUs '$c'"
done
pid=$(qp_launch c2 --mode=numa -- "$@") || fail "qemu-pin did not launch the numa VM: $pid"
check_vm_or_fail "numa VM with a memory-only guest node" plan2.json "$pid"
lab_cleanup
exit 0
