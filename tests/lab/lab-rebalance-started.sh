# In-lab test (shape 4n): `rebalance` plans no move out of the host nodes a
# VM was started inside. Two VMs started with --hostnodes=0 and
# --hostnodes=1 leave about 150 MiB to claim on each of those nodes; a VM
# of 240 MiB started with --hostnodes=0-1 then spans both. Nodes 2 and 3
# have room for it whole, but it may not go there: its record says
# "started-nodes": "0-1", `rebalance --dry-run --json` lists no move (its
# keeper would refuse one), and `rebalance` moves nothing.
. "$QP_LAB_SRC/lib.sh"

expect_nodes 4
qp_require --mode=balanced
write_fw_halt fw.bin

st=$(status_json) || fail "qemu-pin status failed"
avail() { jq -r --argjson n "$1" '.nodes[] | select(.id == $n) | .["memory-mib"].available' "$st"; }
for n in 0 1; do
  size=$(($(avail $n) - 150))
  [ "$size" -gt 64 ] || fail "node $n has only $(avail $n) MiB available"
  # shellcheck disable=SC2046
  set -- "$QP_QEMU" $(vm_args "fill$n" fw.bin) -smp 1 -m "$size"
  p=$(qp_launch "fill$n" --mode=balanced --hostnodes=$n -- "$@") || fail "qemu-pin did not launch the VM on node $n: $p"
done

# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args span fw.bin) -smp 1 -m 240
pid=$(qp_launch span --mode=balanced --hostnodes=0-1 -- "$@") || fail "qemu-pin did not launch the 240 MiB VM: $pid"
claim=$(claim_of "$pid")
assert_eq "the 240 MiB VM spans nodes 0 and 1" "0,1" "$(echo "$claim" | jq -r 'keys | join(",")')"
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
assert_eq "the 240 MiB VM stays on nodes 0 and 1" "$claim" "$(claim_of "$pid")"
lab_cleanup
exit 0
