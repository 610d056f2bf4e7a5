# In-lab test (shape 4n, 512 MiB per node): a balanced VM too large for the
# room any one node has left is claimed on two nodes as the planner splits
# it, and bound to both with one policy, so the kernel puts its pages where
# its threads run, taking the room another VM claimed there but has not
# touched yet (robustness finding 40). Two VMs of 200 MiB (not
# preallocated) claim most of nodes 1 and 2; then a preallocated VM larger
# than either node's room starts on nodes 1-2. Its keeper moves the pages
# beyond its claim on one node to the other node of its claim: each node
# then holds at most its claim there (and a step, 32 MiB, that the keeper
# leaves). (QEMU's own memory, outside any claim, is not the keeper's to
# move: `status` may still say a node is short by that much.) Then the
# caller moves QEMU into a cgroup v2 cpuset whose memory is node 2's alone,
# as an orchestrator may: the kernel moves every page there and rebinds the
# VM's policy to node 2 alone, and the keeper moves none back onto node 1,
# which QEMU may no longer use (nor says it cannot, every 10 s: its log,
# the launch's standard error, has no such line). The claim follows the
# pages: all of it on node 2, the VM marked as placed by its caller, so a
# move is refused (robustness finding 51). The caller then moves it on to
# node 3, a node outside its claim, as `virsh numatune --live` would: the
# claim follows again.
. "$QP_LAB_SRC/lib.sh"

expect_nodes 4
qp_require --mode=balanced
write_fw_halt fw.bin

for n in 1 2; do
  # shellcheck disable=SC2046
  set -- "$QP_QEMU" $(vm_args "fill$n" fw.bin) -smp 1 -m 200
  p=$(qp_launch "fill$n" --mode=balanced --hostnodes=$n -- "$@") || fail "qemu-pin did not launch the VM on node $n: $p"
done

st=$(status_json) || fail "qemu-pin status failed"
avail() { jq -r --argjson n "$1" '.nodes[] | select(.id == $n) | .["memory-mib"].available' "$st"; }
a1=$(avail 1)
a2=$(avail 2)
size=$((a1 + a2 - 48))
small=$a1
[ "$a2" -lt "$small" ] && small=$a2
[ "$size" -gt $((small + 64)) ] || fail "nodes 1 and 2 have only $a1 and $a2 MiB available"
log "nodes 1 and 2: $a1 and $a2 MiB available; a $size MiB VM needs both"

# Not daemonized: the keeper's log stays the launch's standard error.
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args big fw.bin) -smp 1 -m "$size" -mem-prealloc -pidfile "$QP_LAB_SCRATCH/big.pid"
rm -f big.pid
"$QP_BINARY" --mode=balanced --hostnodes=1-2 -- "$@" >big.out 2>big.err &
QP_LAB_PIDS=$!
wait_for 120 test -s big.pid || fail "the $size MiB VM did not start: $(cat big.err)"
pid=$(cat big.pid)
assert_eq "the launch's QEMU is the process qemu-pin became" "$QP_LAB_PIDS" "$pid"
[ -s big.err ] && fail "a successful launch printed: $(cat big.err)"
claim=$(claim_of "$pid")
c1=$(echo "$claim" | jq -r '.["1"] // 0')
c2=$(echo "$claim" | jq -r '.["2"] // 0')
[ "$c1" -gt 0 ] && [ "$c2" -gt 0 ] || fail "the $size MiB VM is not claimed on both nodes: $claim"
log "claimed: $claim"

# MiB of the VM's guest RAM (the mapping of SIZE MiB) on NODE.
ram_on() { awk -v p="$(on_node "$pid" "$1" "$size")" -v s="$size" 'BEGIN { print int(p * s / 1000) }'; }
within() { [ "$(ram_on 1)" -le $((c1 + 32)) ] && [ "$(ram_on 2)" -le $((c2 + 32)) ]; }
log "guest RAM at the start: $(ram_on 1) MiB on node 1, $(ram_on 2) MiB on node 2"
wait_for 120 within ||
  fail "guest RAM stays beyond its claim: $(ram_on 1) MiB on node 1 (claim $c1), $(ram_on 2) MiB on node 2 (claim $c2)"
log "ok: guest RAM within its claim: $(ram_on 1) MiB on node 1 (claim $c1), $(ram_on 2) MiB on node 2 (claim $c2)"

caller_cgroup lab-split "$pid" 1-2
echo 2 >"$cg/cpuset.mems" || fail "cannot narrow the cgroup's mems to node 2"
none_on_1() { [ "$(ram_on 1)" -eq 0 ]; }
wait_for 60 none_on_1 || fail "the kernel left $(ram_on 1) MiB on node 1 after cpuset.mems became 2"
log "the caller's cgroup put all of it on node 2: $(ram_on 2) MiB"
# Two resident measures (every 10 s) later: nothing moved back, nothing said.
sleep 25
assert_eq "guest RAM on node 1 after two measures" 0 "$(ram_on 1)"
if grep -q "cannot keep the VM's memory" big.err; then
  fail "the keeper tried to move pages onto a node QEMU may not use: $(grep "cannot keep" big.err | head -n 1)"
fi
log "ok: the keeper left the caller's placement alone"

total=$((c1 + c2))
claim_only() { [ "$(claim_of "$pid")" = "{\"$1\":$total}" ]; }
wait_for 30 claim_only 2 ||
  fail "the claim did not follow the caller's cpuset.mems to node 2: $(claim_of "$pid") (was $claim)"
log "ok: the claim followed the pages to node 2: $(claim_of "$pid")"
st=$(status_json) || fail "qemu-pin status failed"
assert_eq "caller-placed of the VM" true \
  "$(jq -r --argjson p "$pid" '.vms[] | select(.["qemu-pid"] == $p) | .["caller-placed"]' "$st")"
if "$QP_BINARY" move "$pid" --to-nodes=1 >move.out 2>&1; then
  fail "a move of the VM whose memory the caller confined to node 2 succeeded: $(cat move.out)"
fi
grep -q "cpuset.mems" move.out || fail "the refused move does not say why: $(cat move.out)"
log "ok: move refused: $(head -n 1 move.out)"

echo 2-3 >"$cg/cpuset.mems" || fail "cannot widen the cgroup's mems to 2-3"
echo 3 >"$cg/cpuset.mems" || fail "cannot narrow the cgroup's mems to node 3"
all_on_3() { [ "$(on_node "$pid" 3 "$size")" -eq 1000 ]; }
wait_for 60 all_on_3 || fail "the kernel left guest RAM off node 3: $(on_node "$pid" 3 "$size") permille on it"
wait_for 30 claim_only 3 ||
  fail "the claim did not follow the caller's cpuset.mems to node 3: $(claim_of "$pid")"
log "ok: the claim followed the pages to node 3: $(claim_of "$pid")"

lab_cleanup
rmdir "$cg" 2>/dev/null
exit 0
