# In-lab test (shape 4n): a keeper that refuses a rebalance's move because
# its VM does not fit on the destination under the settings the VM was
# started with (its own host reserve, which its record does not say) does
# not end the rebalance (qemu-pin(1), rebalance: "A keeper that refuses a
# move all the same ... does not end the rebalance"). A balanced VM is
# launched with a per-node reserve that leaves each node about 70% of it,
# so it spans two nodes; without that reserve one node holds it, so a
# rebalance plans its move. `qemu-pin rebalance` then exits 0 with nothing
# on stderr, the VM's claim stays where it was, and `rebalance --json`
# lists it in `kept` as refused by its keeper.
. "$QP_LAB_SRC/lib.sh"

expect_nodes 4
qp_require --mode=balanced
write_fw_halt fw.bin

sf=$(status_json) || fail "qemu-pin status --json failed"
room=$(jq '[.nodes[]["memory-mib"] | (.available // .uncommitted)] | min' "$sf")
[ "${room:-0}" -gt 300 ] || fail "a node has only ${room:-?} MiB to claim: too small a lab node"
size=$((room * 40 / 100))
# Each node keeps all but 70% of the VM's size for the host.
reserve=$(jq -r --argjson keep $((size * 70 / 100)) \
  '[.nodes[] | "\(.id):\(.["memory-mib"].total - $keep)"] | join(",")' "$sf")
log "a VM of $size MiB, launched with --node-reserve-mib=$reserve"

# shellcheck disable=SC2046
pid=$(qp_launch span --mode=balanced --node-reserve-mib="$reserve" -- "$QP_QEMU" \
  $(vm_args span fw.bin) -smp 1 -m "$size") || fail "qemu-pin did not launch the VM: $pid"
before=$(claim_of "$pid")
[ "$(printf '%s' "$before" | jq 'length')" = 2 ] ||
  fail "premise: the VM spans two nodes under its reserve: its claim is $before"
sf=$(status_json) || fail "qemu-pin status --json failed"
id=$(jq -r --argjson p "$pid" '.vms[] | select(.["qemu-pid"] == $p) | .id' "$sf")

"$QP_BINARY" rebalance --dry-run --json >dry.json 2>dry.err || fail "rebalance --dry-run failed: $(cat dry.err)"
assert_eq "premise: the dry run moves the spanning VM" "$id" "$(jq -r '.moves[0].vm' dry.json)"

"$QP_BINARY" rebalance >reb.out 2>reb.err ||
  fail "rebalance exited non-zero after the VM's keeper refused the move: $(cat reb.err)"
[ -s reb.err ] && fail "rebalance printed on stderr: $(cat reb.err)"
log "rebalance: $(cat reb.out)"
assert_eq "the refused VM's claim" "$before" "$(claim_of "$pid")"

"$QP_BINARY" rebalance --json >reb.json 2>reb.err || fail "rebalance --json failed: $(cat reb.err)"
assert_eq "moves made" "0" "$(jq '.moves | length' reb.json)"
kept=$(jq -r --arg id "$id" '.kept[] | select(startswith($id + ":"))' reb.json)
case $kept in
  *"keeper refused"*) log "ok: kept: $kept" ;;
  *) fail "rebalance --json does not keep the VM its keeper refused: kept $(jq -c .kept reb.json)" ;;
esac
lab_cleanup
