# In-lab test (shape 4n: 2 CPUs per node): host CPUs taken offline and back
# online under running VMs. The kernel shows a thread's affinity less the
# CPUs offline (nothing when they all are) but keeps them: the keeper must
# not take that for the caller's pinning, nor write a claim on no CPU.
# - a balanced VM on node 1 (CPUs 2-3): CPU 3 offline, its vCPU 0 stays the
#   plan's (not "placed by its caller", its load on 2-3); CPU 2 offline too,
#   node 1 without a CPU: the record stays readable (it was written with
#   "cpus": "" and moved to .corrupt by the next reader, the VM gone from
#   status and its node blocked), vCPU 0 still the plan's; both back
#   online: every thread on the plan's CPUs, the claim the plan's;
# - a one-to-one VM on node 2 (CPUs 4-5): CPU 4, vCPU 0's core, offline:
#   the core stays dedicated to it; back online and vCPU 1 reset: both
#   cores dedicated, each vCPU on its own.
# Each step pins the VM's vCPU 1 somewhere new by hand: the keeper's next
# look takes that in, and the look that does has seen the CPUs offline.
. "$QP_LAB_SRC/lib.sh"

expect_nodes 4
qp_require --mode=balanced
assert_eq "node 1's CPUs" 2-3 "$(node_cpus 1)"
assert_eq "node 2's CPUs" 4-5 "$(node_cpus 2)"
write_fw_halt fw.bin

cpu_online() { echo "$2" >"/sys/devices/system/cpu/cpu$1/online" || fail "cannot set CPU $1 online to $2"; }
vcpu_tid() { vcpu_threads "$1" | awk -v i="$2" '$1 == i { print $2 }'; }
# vm_json PID: the VM's entry of status --json (empty if it is not there).
vm_json() {
  _sf=$(status_json) || fail "qemu-pin status --json failed"
  jq -c --argjson p "$1" '.vms[] | select(.["qemu-pid"] == $p)' "$_sf"
}
warnings() {
  _sf=$(status_json) || fail "qemu-pin status --json failed"
  jq -c '.warnings' "$_sf"
}
# looked PID CPU: the keeper of PID has counted a vCPU on CPU (the one
# pinned by hand), or status has something to say (a record it could not
# read).
looked() {
  _sf=$(status_json) || return 1
  jq -e --argjson p "$1" --arg c "$2" '(.warnings | length > 0)
    or ([.vms[] | select(.["qemu-pid"] == $p) | .["cpu-load"][].cpus] | index($c) != null)' \
    "$_sf" >/dev/null
}
all_on() { # PID CPULIST: every thread of PID may run on exactly CPULIST
  for _t in /proc/"$1"/task/*; do
    [ "$(cpus_allowed_of "${_t##*/}")" = "$2" ] || return 1
  done
}

# ---- A balanced VM on node 1 ----
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args ba fw.bin) -smp 2 -m 64
qp_plan --mode=balanced --hostnodes=1 -- "$@" >ba-plan.json || fail "qemu-pin plan failed"
pid=$(qp_launch ba --mode=balanced --hostnodes=1 -- "$@") || fail "qemu-pin did not launch the balanced VM: $pid"
check_vm_or_fail "balanced VM on node 1" ba-plan.json "$pid"
assert_eq "its claim" '{"load":{"1":2},"cpu-load":[{"cpus":"2-3","vcpus":2}],"caller-placed":false}' \
  "$(vm_json "$pid" | jq -c '{load, "cpu-load", "caller-placed"}')"
t0=$(vcpu_tid "$pid" 0) t1=$(vcpu_tid "$pid" 1)

cpu_online 3 0
taskset -pc 6 "$t1" >/dev/null || fail "taskset vCPU 1 to CPU 6"
wait_for 60 looked "$pid" 6 || fail "the keeper never counted vCPU 1 on CPU 6: $(vm_json "$pid")"
assert_eq "status's warnings with CPU 3 offline" '[]' "$(warnings)"
assert_eq "the claim with CPU 3 offline (vCPU 0 the plan's, vCPU 1 the caller's)" \
  '[{"cpus":"2-3","vcpus":1},{"cpus":"6","vcpus":1}]' "$(vm_json "$pid" | jq -c '.["cpu-load"]')"
assert_eq "vCPU 0's affinity with CPU 3 offline" 2-3 "$(cpus_allowed_of "$t0")"

cpu_online 2 0
taskset -pc 7 "$t1" >/dev/null || fail "taskset vCPU 1 to CPU 7"
wait_for 60 looked "$pid" 7 || fail "the keeper never counted vCPU 1 on CPU 7: $(vm_json "$pid")"
assert_eq "status's warnings with node 1's CPUs all offline" '[]' "$(warnings)"
assert_eq "the claim with node 1's CPUs all offline" \
  '[{"cpus":"2-3","vcpus":1},{"cpus":"7","vcpus":1}]' "$(vm_json "$pid" | jq -c '.["cpu-load"]')"
assert_eq "records moved aside" "" "$(ls /run/qemu-pin | grep corrupt)"

cpu_online 2 1
cpu_online 3 1
taskset -pc 2-3 "$t1" >/dev/null || fail "taskset vCPU 1 back to CPUs 2-3"
wait_for 60 all_on "$pid" 2-3 || fail "node 1's CPUs back: not every thread of the VM is on 2-3: $(vm_flat "$pid" | tr '\n' ';')"
check_vm_or_fail "balanced VM, node 1's CPUs back" ba-plan.json "$pid"
assert_eq "its claim, node 1's CPUs back" '{"load":{"1":2},"cpu-load":[{"cpus":"2-3","vcpus":2}],"caller-placed":false}' \
  "$(vm_json "$pid" | jq -c '{load, "cpu-load", "caller-placed"}')"

# ---- A one-to-one VM on node 2 ----
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args oo fw.bin) -smp 2 -m 64
opid=$(qp_launch oo --mode=one-to-one --hostnodes=2 -- "$@") || fail "qemu-pin did not launch the one-to-one VM: $opid"
assert_eq "its dedicated CPUs" 4-5 "$(vm_json "$opid" | jq -r '.["dedicated-cpus"]')"
o0=$(vcpu_tid "$opid" 0) o1=$(vcpu_tid "$opid" 1)
c0=$(cpus_allowed_of "$o0") c1=$(cpus_allowed_of "$o1")
cpu_online "$c0" 0
taskset -pc 6 "$o1" >/dev/null || fail "taskset vCPU 1 to CPU 6"
wait_for 60 looked "$opid" 6 || fail "the keeper never counted vCPU 1 on CPU 6: $(vm_json "$opid")"
assert_eq "status's warnings with CPU $c0 offline" '[]' "$(warnings)"
assert_eq "dedicated CPUs with vCPU 0's CPU $c0 offline, vCPU 1 moved off $c1" "$c0" \
  "$(vm_json "$opid" | jq -r '.["dedicated-cpus"]')"
cpu_online "$c0" 1
taskset -pc 0-7 "$o1" >/dev/null || fail "taskset vCPU 1 to every CPU"
dedicated_both() { [ "$(vm_json "$opid" | jq -r '.["dedicated-cpus"]')" = 4-5 ]; }
wait_for 60 dedicated_both || fail "vCPU 1 reset, CPU $c0 back: dedicated $(vm_json "$opid" | jq -r '.["dedicated-cpus"]'), not 4-5"
wait_for 60 sh -c "grep -q '^Cpus_allowed_list:[[:space:]]*$c1\$' /proc/$o1/status" ||
  fail "vCPU 1 reset: on $(cpus_allowed_of "$o1"), not back on $c1"
assert_eq "vCPU 0 after its CPU came back" "$c0" "$(cpus_allowed_of "$o0")"
assert_eq "status's warnings at the end" '[]' "$(warnings)"
lab_cleanup
exit 0
