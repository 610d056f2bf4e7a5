# In-lab test (shape 4n, 512 MiB per node): `qemu-pin move` of a VM whose
# guest RAM is in 2 MiB hugepages (preallocated). Nodes 0-2 get a pool of
# 40 pages (80 MiB), node 3 none. Moved, the VM's hugepages are all on the
# new node (numa_maps), taken from that node's pool (free_hugepages) and
# given back to the old one's, its threads run on the new node's CPUs, and
# its claim names the new node's pool only. A move onto node 3, whose pool
# is empty, is refused in one line and changes nothing. Then `rebalance`
# brings a hugepage VM that had to span two nodes' pools back to one node
# once a pool there has its pages.
. "$QP_LAB_SRC/lib.sh"

expect_nodes 4
qp_require --mode=balanced
pool() { hugepage_pool "$@"; }
[ -e "$(pool 0 nr_hugepages)" ] || fail "the lab kernel has no 2 MiB hugepage pools per node"
for n in 0 1 2; do echo 40 >"$(pool "$n" nr_hugepages)"; done
echo 0 >"$(pool 3 nr_hugepages)"
for n in 0 1 2; do
  assert_eq "node $n's pool" 40 "$(cat "$(pool "$n" nr_hugepages)")"
done

write_fw_halt fw.bin
ram='{"qom-type":"memory-backend-memfd","id":"pc.ram","size":67108864,"hugetlb":true,"hugetlbsize":2097152,"prealloc":true}'
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args hg fw.bin) -smp 1 -m 64 -object "$ram" -machine memory-backend=pc.ram
pid=$(qp_launch hg --mode=balanced -- "$@") || fail "qemu-pin did not launch the hugepage VM: $pid"

from=$(huge_of "$pid" | jq -r '.[0].node')
assert_eq "the claim: 32 hugepages on one node" "[{\"node\":$from,\"page-kib\":2048,\"pages\":32}]" "$(huge_of "$pid")"
assert_eq "before: the guest's hugepages on node $from" 32 "$(huge_on "$pid" "$from")"
to=$(((from + 1) % 3))
free_from=$(cat "$(pool "$from" free_hugepages)") free_to=$(cat "$(pool "$to" free_hugepages)")

"$QP_BINARY" move hg --to-nodes="$to" >move.out 2>move.err || fail "the move of the hugepage VM failed: $(cat move.err)"
[ -s move.err ] && fail "a successful move printed on stderr: $(cat move.err)"
log "$(cat move.out)"
assert_eq "after the move: the guest's hugepages on node $to" 32 "$(huge_on "$pid" "$to")"
assert_eq "after the move: none left on node $from" 0 "$(huge_on "$pid" "$from")"
assert_eq "node $to's pool gave 32 pages" $((free_to - 32)) "$(cat "$(pool "$to" free_hugepages)")"
assert_eq "node $from's pool has its 32 pages back" $((free_from + 32)) "$(cat "$(pool "$from" free_hugepages)")"
assert_eq "after the move: the claim names node $to's pool only" "[{\"node\":$to,\"page-kib\":2048,\"pages\":32}]" "$(huge_of "$pid")"
assert_threads_on_node "after the move" "$pid" "$to"

# Node 3 has no pool: refused in one line, nothing changed.
if "$QP_BINARY" move hg --to-nodes=3 >nofit.out 2>nofit.err; then
  fail "a move onto node 3, which has no hugepages, succeeded: $(cat nofit.out)"
fi
assert_eq "the refusal is one line" 1 "$(wc -l <nofit.err)"
log "refused: $(cat nofit.err)"
assert_eq "after the refusal: the claim stays on node $to" "[{\"node\":$to,\"page-kib\":2048,\"pages\":32}]" "$(huge_of "$pid")"
assert_eq "after the refusal: the guest's hugepages stay on node $to" 32 "$(huge_on "$pid" "$to")"
lab_cleanup
no_vms() { [ "$(jq '.vms | length' "$(status_json)")" = 0 ]; }
wait_for 30 no_vms || fail "the first VM's claim outlived it"

# Rebalance: a hugepage VM that had to span comes back to one node once a
# pool there has its pages. Pools of 20 pages on nodes 0 and 1 and none
# elsewhere: its 32 pages span nodes 0-1. Node 1's pool then grows to 32,
# exactly the VM's pages: the move counts its own pages there as its own.
for n in 0 1; do echo 20 >"$(pool "$n" nr_hugepages)"; done
echo 0 >"$(pool 2 nr_hugepages)"
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args hs fw.bin) -smp 1 -m 64 -object "$ram" -machine memory-backend=pc.ram
pid=$(qp_launch hs --mode=balanced -- "$@") || fail "qemu-pin did not launch the spanning hugepage VM: $pid"
span=$(huge_of "$pid" | jq -r '[.[] | select(.pages > 0) | .node] | sort | map(tostring) | join(",")')
assert_eq "the claim: its hugepages span nodes 0 and 1" "0,1" "$span"
on0=$(huge_on "$pid" 0)
assert_eq "before: 32 pages on nodes 0 and 1" 32 $((on0 + $(huge_on "$pid" 1)))
echo 32 >"$(pool 1 nr_hugepages)"
assert_eq "node 1's pool" 32 "$(cat "$(pool 1 nr_hugepages)")"

"$QP_BINARY" rebalance --dry-run --json >dry.json 2>dry.err || fail "rebalance --dry-run failed: $(cat dry.err)"
[ -s dry.err ] && fail "rebalance --dry-run printed on stderr: $(cat dry.err)"
log "dry run: $(jq -c '.moves' dry.json), kept: $(jq -c '.kept' dry.json)"
assert_eq "the dry run moves the hugepage VM from nodes 0-1 to node 1" '[{"from":"0-1","to":"1"}]' \
  "$(jq -c '[.moves[] | {from, to}]' dry.json)"
assert_eq "the dry run moved nothing" "$on0" "$(huge_on "$pid" 0)"
"$QP_BINARY" rebalance >reb.out 2>reb.err || fail "rebalance failed: $(cat reb.err)"
[ -s reb.err ] && fail "rebalance printed on stderr: $(cat reb.err)"
log "rebalance: $(tr '\n' ';' <reb.out)"
grep -q "from nodes 0-1 to 1:" reb.out || fail "the rebalance's line does not say the VM left nodes 0-1: $(cat reb.out)"
assert_eq "after the rebalance: the guest's 32 hugepages on node 1" 32 "$(huge_on "$pid" 1)"
assert_eq "after the rebalance: none left on node 0" 0 "$(huge_on "$pid" 0)"
assert_eq "after the rebalance: the claim names node 1's pool only" '[{"node":1,"page-kib":2048,"pages":32}]' "$(huge_of "$pid")"
assert_threads_on_node "after the rebalance" "$pid" 1
lab_cleanup
exit 0
