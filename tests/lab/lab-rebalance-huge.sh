# In-lab test (shape 4n): `rebalance` moves a guest node of a numa VM whose
# memory is in 2 MiB hugepages. Pools of 32 pages on node 0, 16 on node 1,
# none on nodes 2 and 3: a numa VM of two guest nodes of 16 pages each
# (memfd hugetlb backends, not preallocated) is placed on nodes 0-1. Node
# 2's pool then grows to 16 pages. A balanced VM of 32 pages fits no
# node's pool alone: its plan spans two. `rebalance --dry-run --json -- ...` moves the numa VM's guest node
# off node 0 to node 2 (the one other pool with its 16 pages) and plans the
# request on node 0 alone; `rebalance -- ...` makes the move: the numa
# VM's claim names the pools of nodes 1 and 2, its backends are bound
# there (numa_maps), and `plan` puts the request on node 0.
. "$QP_LAB_SRC/lib.sh"

expect_nodes 4
qp_require --mode=balanced
pool() { echo "/sys/devices/system/node/node$1/hugepages/hugepages-2048kB/$2"; }
[ -e "$(pool 0 nr_hugepages)" ] || fail "the lab kernel has no 2 MiB hugepage pools per node"
echo 32 >"$(pool 0 nr_hugepages)"
echo 16 >"$(pool 1 nr_hugepages)"
echo 0 >"$(pool 2 nr_hugepages)"
echo 0 >"$(pool 3 nr_hugepages)"
for n in 0:32 1:16; do
  assert_eq "node ${n%:*}'s pool" "${n#*:}" "$(cat "$(pool "${n%:*}" nr_hugepages)")"
done
write_fw_halt fw.bin

hp() { echo "{\"qom-type\":\"memory-backend-memfd\",\"id\":\"$1\",\"size\":$(($2 * 1048576)),\"hugetlb\":true,\"hugetlbsize\":2097152}"; }
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args nv fw.bin) -smp 2 -m 64 -object "$(hp g0 32)" -object "$(hp g1 32)" \
  -numa node,nodeid=0,cpus=0,memdev=g0 -numa node,nodeid=1,cpus=1,memdev=g1
pid=$(qp_launch nv --mode=numa -- "$@") || fail "qemu-pin did not launch the numa hugepage VM: $pid"
huge_nodes() {
  _sf=$(status_json) || fail "qemu-pin status --json failed"
  jq -r --argjson p "$1" '.vms[] | select(.["qemu-pid"] == $p) | [.hugepages[] | select(.pages > 0) | .node] | sort | map(tostring) | join(",")' "$_sf"
}
assert_eq "the numa VM's hugepages are claimed on nodes 0 and 1" "0,1" "$(huge_nodes "$pid")"
echo 16 >"$(pool 2 nr_hugepages)"
assert_eq "node 2's pool" 16 "$(cat "$(pool 2 nr_hugepages)")"

# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args big fw.bin) -smp 1 -m 64 -object "$(hp pc.ram 64)" -machine memory-backend=pc.ram
"$QP_BINARY" plan --mode=balanced -- "$@" >plan0.json 2>plan0.err || fail "plan of the 64 MiB hugepage VM failed: $(cat plan0.err)"
nodes0=$(jq -r '.["host-nodes"]' plan0.json)
case $nodes0 in
  *,* | *-*) log "before: the 64 MiB hugepage VM's plan spans nodes $nodes0" ;;
  *) fail "before: the 64 MiB hugepage VM fits node $nodes0 alone" ;;
esac

"$QP_BINARY" rebalance --dry-run --json --mode=balanced -- "$@" >dry.json 2>dry.err ||
  fail "rebalance --dry-run failed: $(cat dry.err)"
[ -s dry.err ] && fail "rebalance --dry-run printed on stderr: $(cat dry.err)"
log "dry run: $(jq -c '.moves' dry.json), kept: $(jq -c '.kept' dry.json)"
assert_eq "the dry run moves the numa VM from nodes 0-1 to 1-2" '[{"from":"0-1","to":"1-2"}]' \
  "$(jq -c '[.moves[] | {from, to}]' dry.json)"
assert_eq "after the dry run's move the request is on node 0" 0 "$(jq -r '.plan["host-nodes"]' dry.json)"
assert_eq "the dry run moved nothing" "0,1" "$(huge_nodes "$pid")"

# -v: its lines say what each keeper answered.
"$QP_BINARY" rebalance -v --mode=balanced -- "$@" >made.out 2>made.err || fail "rebalance failed: $(cat made.err)"
grep -v "^qemu-pin: " made.err | grep -q . && fail "rebalance printed on stderr: $(cat made.err)"
grep -q "^qemu-pin: warning: " made.err && fail "rebalance warned: $(cat made.err)"
log "rebalance: $(tr '\n' ';' <made.out) -v: $(tr '\n' ';' <made.err)"
assert_eq "after the rebalance: the numa VM's hugepages are claimed on nodes 1 and 2" "1,2" "$(huge_nodes "$pid")"
bound=$(numa_maps_bind_nodes "$pid" | awk '$1 == 32 { print $2 }' | sort | tr '\n' ' ')
assert_eq "after the rebalance: its two backends are bound to nodes 1 and 2" "bind:1 bind:2 " "$bound"
"$QP_BINARY" plan --mode=balanced -- "$@" >plan1.json 2>plan1.err || fail "plan after the rebalance failed: $(cat plan1.err)"
assert_eq "after the rebalance: the 64 MiB hugepage VM fits node 0" 0 "$(jq -r '.["host-nodes"]' plan1.json)"
lab_cleanup
exit 0
