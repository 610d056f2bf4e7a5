# In-lab test (shape 4n): numa mode. A guest with two NUMA nodes (its own
# memory backends of 128 and 192 MiB) gets two distinct host nodes: each
# guest node's vCPUs pinned to its host node's CPUs and its memory bound
# there, as the plan says. A second such guest then gets the two nodes the
# first left free. (Nodes without memdev= are refused, as QEMU 7.2 refuses
# them.)
. "$QP_LAB_SRC/lib.sh"

expect_nodes 4
qp_require --mode=numa
write_fw_halt fw.bin

# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args numa1 fw.bin) -smp 4 -m 320 \
  -object memory-backend-ram,id=g0,size=128M -object memory-backend-ram,id=g1,size=192M \
  -numa node,nodeid=0,cpus=0-1,memdev=g0 -numa node,nodeid=1,cpus=2-3,memdev=g1
qp_plan --mode=numa -- "$@" >plan1.json || fail "qemu-pin plan failed: $(cat plan1.json)"
assert_eq "plan mode" numa "$(plan_mode plan1.json)"
n0=$(jq -r '.memory[] | select(.["guest-node"] == 0) | .["host-nodes"]' plan1.json)
n1=$(jq -r '.memory[] | select(.["guest-node"] == 1) | .["host-nodes"]' plan1.json)
[ "$n0" != "$n1" ] || fail "plan puts both guest nodes on host node $n0"
assert_eq "plan: vCPU 0 on guest node 0's host node $n0" "$(node_cpus "$n0")" \
  "$(jq -r '.vcpus[0].cpus' plan1.json)"
assert_eq "plan: vCPU 3 on guest node 1's host node $n1" "$(node_cpus "$n1")" \
  "$(jq -r '.vcpus[3].cpus' plan1.json)"
pid1=$(qp_launch numa1 --mode=numa -- "$@") || fail "qemu-pin did not launch the first VM: $pid1"
check_vm_or_fail "numa VM with its own backends" plan1.json "$pid1"
check_detects_breakage plan1.json "$pid1"

# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args numa2 fw.bin) -smp 4 -m 256 \
  -object memory-backend-ram,id=h0,size=128M -object memory-backend-ram,id=h1,size=128M \
  -numa node,nodeid=0,cpus=0-1,memdev=h0 -numa node,nodeid=1,cpus=2-3,memdev=h1
qp_plan --mode=numa -- "$@" >plan2.json || fail "qemu-pin plan failed: $(cat plan2.json)"
used2=$(jq -r '[.memory[] | .["host-nodes"]] | join(",")' plan2.json)
for x in $(list_expand "$used2"); do
  case ",$n0,$n1," in *",$x,"*) fail "second numa VM planned on node $x, already used by the first ($n0,$n1)" ;; esac
done
log "ok: the second VM's guest nodes go to host nodes $used2, the first holds $n0,$n1"
pid2=$(qp_launch numa2 --mode=numa -- "$@") || fail "qemu-pin did not launch the second VM: $pid2"
check_vm_or_fail "second numa VM" plan2.json "$pid2"
lab_cleanup
exit 0
