# In-lab test (shape 4n): `rebalance` plans no move out of the host nodes a
# VM was started inside. Two VMs started with --hostnodes=0 and
# --hostnodes=1 leave about 170 MiB to claim on each of those nodes; a VM
# started with --hostnodes=0-1, sized after them to need both nodes, then
# spans both. Nodes 2 and 3 have room for it whole, but it may not go
# there: its record says "started-nodes": "0-1", `rebalance --dry-run
# --json` lists no move (its keeper would refuse one), and `rebalance`
# moves nothing. The room left on nodes 0 and 1 is read after the two fill
# VMs run, not assumed: their QEMU and keeper processes take memory outside
# any claim, more on some runs than on others.
. "$QP_LAB_SRC/lib.sh"

expect_nodes 4
qp_require --mode=balanced
write_fw_halt fw.bin

st=$(status_json) || fail "qemu-pin status failed"
avail() { jq -r --argjson n "$1" '.nodes[] | select(.id == $n) | .["memory-mib"].available' "$st"; }
for n in 0 1; do
  size=$(($(avail $n) - 170))
  [ "$size" -gt 64 ] || fail "node $n has only $(avail $n) MiB available"
  # shellcheck disable=SC2046
  set -- "$QP_QEMU" $(vm_args "fill$n" fw.bin) -smp 1 -m "$size"
  p=$(qp_launch "fill$n" --mode=balanced --hostnodes=$n -- "$@") || fail "qemu-pin did not launch the VM on node $n: $p"
done

# Size the spanning VM from the room left now: 40 MiB under what nodes 0
# and 1 hold together (what the fill VMs' processes may still take while
# it starts), more than either holds alone, less than node 2 holds.
st=$(status_json) || fail "qemu-pin status failed"
a0=$(avail 0) a1=$(avail 1) a2=$(avail 2)
size=$((a0 + a1 - 40))
big=$((a0 > a1 ? a0 : a1))
log "room after the fill VMs: node 0 $a0 MiB, node 1 $a1 MiB, node 2 $a2 MiB; spanning VM $size MiB"
[ "$size" -gt "$((big + 16))" ] || fail "nodes 0 and 1 hold $a0 and $a1 MiB: no size needs both"
[ "$size" -lt "$a2" ] || fail "node 2 holds only $a2 MiB: a $size MiB VM would not fit there whole"
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args span fw.bin) -smp 1 -m "$size"
pid=$(qp_launch span --mode=balanced --hostnodes=0-1 -- "$@") || fail "qemu-pin did not launch the $size MiB VM: $pid"
claim=$(claim_of "$pid")
assert_eq "the $size MiB VM spans nodes 0 and 1" "0,1" "$(echo "$claim" | jq -r 'keys | join(",")')"
sf=$(status_json) || fail "qemu-pin status --json failed"
log "room: $(jq -c '[.nodes[] | {id, a: .["memory-mib"].available}]' "$sf")"
# The ledger of root's launches: /run/qemu-pin (docs/ledger.md).
record=$(cat /run/qemu-pin/*.json | jq -c --argjson p "$pid" 'select(.["qemu-pid"] == $p)')
assert_eq "its record says where it was started" '"0-1"' "$(echo "$record" | jq -c '.["started-nodes"]')"

"$QP_BINARY" rebalance --dry-run --json >dry.json 2>dry.err || fail "rebalance --dry-run failed: $(cat dry.err)"
[ -s dry.err ] && fail "rebalance --dry-run printed on stderr: $(cat dry.err)"
log "dry run: $(jq -c '.moves' dry.json), kept: $(jq -c '.kept' dry.json)"
assert_eq "the dry run moves no VM out of the nodes it was started inside" '[]' "$(jq -c '[.moves[] | {from, to}]' dry.json)"
"$QP_BINARY" rebalance >made.out 2>made.err || fail "rebalance failed: $(cat made.err)"
[ -s made.err ] && fail "rebalance printed on stderr: $(cat made.err)"
assert_eq "rebalance moves nothing" "qemu-pin: rebalance: no VM to move" "$(cat made.out)"
assert_eq "the $size MiB VM stays on nodes 0 and 1" "$claim" "$(claim_of "$pid")"
lab_cleanup
exit 0
