# In-lab test (shape 4n, 512 MiB per node): memory of a node taken offline
# under a VM claimed there (robustness.md, finding 71). A balanced VM with
# 300 MiB preallocated is moved onto node 3; then node 3's memory blocks
# go offline, as many as the kernel lets go, until the node holds less
# than the claim (the kernel moves the VM's pages off it, its binding
# notwithstanding). `status` warns that node 3 is overcommitted;
# `rebalance --dry-run --json` lists a move of the VM off node 3
# ("relieves": 3), `rebalance` makes it, and afterwards the VM's claim
# names one other node, at least 95% of its RAM is there, every thread of
# QEMU runs on that node's CPUs, and status no longer warns.
. "$QP_LAB_SRC/lib.sh"

expect_nodes 4
qp_require --mode=balanced
write_fw_halt fw.bin
ram='{"qom-type":"memory-backend-ram","id":"pc.ram","size":314572800,"prealloc":true}'
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args off fw.bin) -smp 1 -object "$ram" -machine memory-backend=pc.ram
pid=$(qp_launch off --mode=balanced -- "$@") || fail "qemu-pin did not launch the VM: $pid"
if [ "$(claim_of "$pid")" != '{"3":300}' ]; then
  "$QP_BINARY" move off --to-nodes=3 >move.out 2>move.err || fail "the move onto node 3 failed: $(cat move.err)"
fi
assert_eq "the VM is claimed on node 3" '{"3":300}' "$(claim_of "$pid")"
got=$(on_node "$pid" 3 300)
[ "$got" -ge 950 ] || fail "only $got permille of the VM's RAM is on node 3"

node_total() { awk '/MemTotal/ { print int($4 / 1024) }' "/sys/devices/system/node/node$1/meminfo"; }
was=$(node_total 3)
for m in /sys/devices/system/node/node3/memory[0-9]*; do
  echo 0 >"$m/online" 2>/dev/null || true
done
now=$(node_total 3)
log "node 3: $was MiB, $now MiB with its memory blocks offline"
[ "$now" -lt 300 ] || fail "the kernel took only $((was - now)) MiB of node 3 offline: it still holds the 300 MiB claim"
log "the VM's RAM on node 3 now: $(on_node "$pid" 3 300) permille"

sf=$(status_json) || fail "qemu-pin status --json failed"
over=$(jq -r '.warnings[] | select(startswith("node 3 is overcommitted"))' "$sf")
[ -n "$over" ] || fail "status does not warn that node 3 is overcommitted: $(jq -c '.warnings' "$sf")"
log "status: $over"

"$QP_BINARY" rebalance --dry-run --json --cooldown=0 >dry.json 2>dry.err || fail "rebalance --dry-run failed: $(cat dry.err)"
[ -s dry.err ] && fail "rebalance --dry-run printed on stderr: $(cat dry.err)"
log "dry run: $(jq -c '.moves' dry.json)"
id=$(cat /run/qemu-pin/*.json | jq -r --argjson p "$pid" 'select(.["qemu-pid"] == $p) | .id')
assert_eq "the dry run moves the VM off node 3" "$id 3 3" "$(jq -r '[.moves[] | "\(.vm) \(.from) \(.relieves)"] | join(";")' dry.json)"

# The destination is the rebalance's own choice when it runs (nodes 0-2 all
# have room; the best fit among them moves with the memory in use).
"$QP_BINARY" rebalance --json --cooldown=0 >made.json 2>made.err || fail "rebalance failed: $(cat made.err)"
# The ledger as the move ends (read before anything else).
made=$(status_json) || fail "qemu-pin status --json failed"
[ -s made.err ] && fail "rebalance printed on stderr: $(cat made.err)"
log "made: $(jq -c '.moves' made.json)"
assert_eq "the rebalance moved the VM off node 3" "$id 3 3" "$(jq -r '[.moves[] | "\(.vm) \(.from) \(.relieves)"] | join(";")' made.json)"
to=$(jq -r '.moves[0].to' made.json)
case $to in 0 | 1 | 2) ;; *) fail "the VM went to nodes '$to', not one node with room" ;; esac
# The record says where the pages went as the move ends: node $to does not
# count them twice (outside any claim, and claimed not yet resident).
left=$(jq --argjson n "$to" '.nodes[] | select(.id == $n) | .["memory-mib"].outstanding' "$made")
log "right after the move: $left MiB of node $to's claims not yet resident"
[ "$left" -lt 30 ] || fail "right after the move node $to counts $left MiB of the VM's claim as not yet resident"
assert_eq "the claim names only node $to" "{\"$to\":300}" "$(claim_of "$pid")"
assert_on_node "after the rebalance" "$pid" "$to" 300
sf=$(status_json) || fail "qemu-pin status --json failed"
assert_eq "status no longer warns of node 3" "" "$(jq -r '.warnings[] | select(startswith("node 3 is overcommitted"))' "$sf")"
lab_cleanup
exit 0
