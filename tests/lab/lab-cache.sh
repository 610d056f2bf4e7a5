# In-lab test (shape ccx: 2 nodes, each with 2 L3s of 2 cores). Cache
# domains, end to end:
# - the host model finds the two L3s of each node;
# - one-to-one: with core 0 taken by a first VM, a 2-vCPU VM on node 0
#   gets cores 2 and 3 (one L3), not 1 and 2;
# - balanced: a 2-vCPU VM on node 1 floats over one L3's CPUs (4-5);
# - status --json accounts per L3: dedicated cores and shared vCPUs.
# Every vCPU thread's Cpus_allowed_list is checked against the plan.
. "$QP_LAB_SRC/lib.sh"

expect_nodes 2
l3_of() { cat "/sys/devices/system/cpu/cpu$1/cache/index3/shared_cpu_list"; }
assert_eq "L3 of CPU 1" 0-1 "$(l3_of 1)"
assert_eq "L3 of CPU 2" 2-3 "$(l3_of 2)"
qp_require --mode=one-to-one
write_fw_halt fw.bin

"$QP_BINARY" topology --json >topo.json || fail "qemu-pin topology failed"
assert_eq "cache domains of node 0" "L3 0-1,L3 2-3" \
  "$(jq -r '[.nodes[0].cache_domains[] | "\(.level) \(.cpus)"] | join(",")' topo.json)"
assert_eq "cache domains of node 1" "L3 4-5,L3 6-7" \
  "$(jq -r '[.nodes[1].cache_domains[] | "\(.level) \(.cpus)"] | join(",")' topo.json)"

# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args first fw.bin) -smp 1 -m 64
qp_plan --mode=one-to-one --hostnodes=0 -- "$@" >plan1.json || fail "plan 1 failed"
assert_eq "first VM: vCPU 0" 0 "$(jq -r '.vcpus[0].cpus' plan1.json)"
pid1=$(qp_launch first --mode=one-to-one --hostnodes=0 -- "$@") || fail "first VM: $pid1"
check_vm_or_fail "first one-to-one VM" plan1.json "$pid1"

# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args second fw.bin) -smp 2 -m 64
qp_plan --mode=one-to-one --hostnodes=0 -- "$@" >plan2.json || fail "plan 2 failed"
assert_eq "second VM: vCPUs 0,1" "2 3" \
  "$(jq -r '[.vcpus[].cpus] | join(" ")' plan2.json)"
pid2=$(qp_launch second --mode=one-to-one --hostnodes=0 -- "$@") || fail "second VM: $pid2"
check_vm_or_fail "second one-to-one VM, one L3" plan2.json "$pid2"

# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args third fw.bin) -smp 2 -m 64
qp_plan --mode=balanced --hostnodes=1 -- "$@" >plan3.json || fail "plan 3 failed"
assert_eq "balanced VM: vCPU CPUs" "4-5 4-5" \
  "$(jq -r '[.vcpus[].cpus] | join(" ")' plan3.json)"
pid3=$(qp_launch third --mode=balanced --hostnodes=1 -- "$@") || fail "balanced VM: $pid3"
check_vm_or_fail "balanced VM floating in one L3" plan3.json "$pid3"

st=$(status_json) || fail "qemu-pin status --json failed"
assert_eq "status: node 0 L3s, dedicated cores" "1 2" \
  "$(jq -r '[.nodes[0]["cache-domains"][]["dedicated-cores"]] | join(" ")' "$st")"
assert_eq "status: node 1 L3s, shared vCPUs" "2 0" \
  "$(jq -r '[.nodes[1]["cache-domains"][]["shared-vcpus"]] | join(" ")' "$st")"
"$QP_BINARY" status | grep '^  L3 ' | while read -r line; do log "status: $line"; done
lab_cleanup
exit 0
