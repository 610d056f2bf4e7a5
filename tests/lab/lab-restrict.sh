# In-lab test (shape 2s2n: nodes 0,1 on socket 0, nodes 2,3 on socket 1;
# distances 10/12/32). --hostnodes and --affinity restrict every mode, and a
# balanced guest too big for one node takes two nodes of the same socket.
. "$QP_LAB_SRC/lib.sh"

expect_nodes 4
qp_require --mode=balanced
write_fw_halt fw.bin

# 1. --hostnodes=3, balanced: everything on node 3.
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args r1 fw.bin) -smp 2 -m 192
qp_plan --mode=balanced --hostnodes=3 -- "$@" >plan1.json || fail "qemu-pin plan failed: $(cat plan1.json)"
assert_eq "plan with --hostnodes=3: host nodes" 3 "$(jq -r '.["host-nodes"]' plan1.json)"
assert_eq "plan with --hostnodes=3: process CPUs" "$(node_cpus 3)" "$(plan_process_cpus plan1.json)"
pid=$(qp_launch r1 --mode=balanced --hostnodes=3 -- "$@") || fail "qemu-pin did not launch (--hostnodes=3): $pid"
check_vm_or_fail "balanced VM with --hostnodes=3" plan1.json "$pid"
lab_cleanup

# 2. --hostnodes=2-3, numa: the two guest nodes on nodes 2 and 3.
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args r2 fw.bin) -smp 2 -m 320 \
  -object memory-backend-ram,id=g0,size=128M -object memory-backend-ram,id=g1,size=192M \
  -numa node,nodeid=0,cpus=0,memdev=g0 -numa node,nodeid=1,cpus=1,memdev=g1
qp_plan --mode=numa --hostnodes=2-3 -- "$@" >plan2.json || fail "qemu-pin plan failed: $(cat plan2.json)"
assert_eq "plan with --hostnodes=2-3: nodes of guest memory" "2,3" \
  "$(jq -r '[.memory[] | .["host-nodes"]] | sort | join(",")' plan2.json)"
pid=$(qp_launch r2 --mode=numa --hostnodes=2-3 -- "$@") || fail "qemu-pin did not launch (--hostnodes=2-3): $pid"
check_vm_or_fail "numa VM with --hostnodes=2-3" plan2.json "$pid"
lab_cleanup

# 3. --affinity=5-6 (one CPU of node 2, one of node 3), balanced.
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args r3 fw.bin) -smp 1 -m 128
qp_plan --mode=balanced --affinity=5-6 -- "$@" >plan3.json || fail "qemu-pin plan failed: $(cat plan3.json)"
pc=$(plan_process_cpus plan3.json)
[ -z "$(list_outside 5-6 "$pc")" ] || fail "plan with --affinity=5-6 uses CPUs $pc"
log "ok: plan with --affinity=5-6: process CPUs $pc"
pid=$(qp_launch r3 --mode=balanced --affinity=5-6 -- "$@") || fail "qemu-pin did not launch (--affinity=5-6): $pid"
check_vm_or_fail "balanced VM with --affinity=5-6" plan3.json "$pid"
lab_cleanup

# 4. No restriction, 640 MiB (more than any node holds): two nodes, and the
# two of one socket (distance 12, not 32).
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args r4 fw.bin) -smp 2 -m 640
qp_plan --mode=balanced -- "$@" >plan4.json || fail "qemu-pin plan failed: $(cat plan4.json)"
hn=$(jq -r '.["host-nodes"]' plan4.json)
case $hn in
  0-1|2-3) log "ok: 640 MiB guest on host nodes $hn, one socket" ;;
  *) fail "640 MiB balanced guest on host nodes '$hn', expected 0-1 or 2-3 (same socket)" ;;
esac
pid=$(qp_launch r4 --mode=balanced -- "$@") || fail "qemu-pin did not launch the 640 MiB VM: $pid"
check_vm_or_fail "balanced VM over two nodes of one socket" plan4.json "$pid"
lab_cleanup
exit 0
