# In-lab test (shape 4n): balanced mode. A 2-vCPU, 256 MiB guest without vNUMA
# fits one node: the plan names one node, and the running QEMU has every vCPU
# floating on exactly that node's CPUs and its 256 MiB bound there.
. "$QP_LAB_SRC/lib.sh"

expect_nodes 4
qp_require --mode=balanced
write_fw_halt fw.bin
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args bal fw.bin) -smp 2 -m 256

qp_plan --mode=balanced -- "$@" >plan.json || fail "qemu-pin plan failed: $(cat plan.json)"
assert_eq "plan mode" balanced "$(plan_mode plan.json)"
node=$(jq -r '.["host-nodes"]' plan.json)
assert_eq "plan: one host node" 1 "$(list_expand "$node" | wc -w)"
assert_eq "plan: process CPUs are node $node's CPUs" "$(node_cpus "$node")" "$(plan_process_cpus plan.json)"

pid=$(qp_launch bal --mode=balanced -- "$@") || fail "qemu-pin did not launch the VM: $pid"
check_vm_or_fail "balanced VM" plan.json "$pid"
check_detects_breakage plan.json "$pid"
lab_cleanup
exit 0
