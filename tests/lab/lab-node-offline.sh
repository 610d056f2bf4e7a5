# In-lab test (shape 4n-movable: node 3's memory is all in ZONE_MOVABLE):
# a node whose memory goes offline entirely under a VM claimed there
# (robustness.md, finding 73). A balanced VM with 200 MiB preallocated is
# moved onto node 3, then every memory block of node 3 goes offline: the
# kernel moves the VM's pages to other nodes, node 3 leaves has_memory and
# every cpuset's effective mems, and QEMU's Mems_allowed_list becomes 0-2.
# The keeper's claim follows the pages off node 3, but no caller chose
# that: the VM is not marked caller-placed (status --json), `rebalance
# --dry-run` does not keep it as the caller's, the keeper's -v log says
# once that node 3 has no memory online, and a move to another node is
# made (a caller-placed VM's is refused naming cpuset.mems).
. "$QP_LAB_SRC/lib.sh"

expect_nodes 4
for m in /sys/devices/system/node/node3/memory[0-9]*; do
  case $(cat "$m/valid_zones") in
    Movable*) ;;
    *) fail "memory block ${m##*/} of node 3 is not movable ($(cat "$m/valid_zones")): the shape is not 4n-movable" ;;
  esac
done
qp_require --mode=balanced
write_fw_halt fw.bin

# Not daemonized (a daemon's keeper has no stderr), with -v: the keeper's
# log stays the launch's standard error.
ram='{"qom-type":"memory-backend-ram","id":"pc.ram","size":209715200,"prealloc":true}'
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args off fw.bin) -smp 1 -object "$ram" -machine memory-backend=pc.ram \
  -pidfile "$QP_LAB_SCRATCH/off.pid"
rm -f off.pid
"$QP_BINARY" -v --mode=balanced -- "$@" >off.out 2>off.err &
QP_LAB_PIDS=$!
wait_for 120 test -s off.pid || fail "the VM did not start: $(cat off.err)"
pid=$(cat off.pid)
assert_eq "the launch's QEMU is the process qemu-pin became" "$QP_LAB_PIDS" "$pid"
# The keeper answers moves once its control socket listens.
wait_for 60 grep -q '@qemu-pin-keeper/' /proc/net/unix || fail "the keeper opened no control socket: $(cat off.err)"
if [ "$(claim_of "$pid")" != '{"3":200}' ]; then
  "$QP_BINARY" move "$pid" --to-nodes=3 >move3.out 2>move3.err || fail "the move onto node 3 failed: $(cat move3.err)"
fi
assert_eq "the VM is claimed on node 3" '{"3":200}' "$(claim_of "$pid")"
assert_on_node "on node 3" "$pid" 3 200

caller_placed() {
  _st=$(status_json) || fail "qemu-pin status --json failed"
  jq -r --argjson p "$pid" '.vms[] | select(.["qemu-pid"] == $p) | .["caller-placed"] // false' "$_st"
}
assert_eq "caller-placed of the VM on node 3" false "$(caller_placed)"

for m in /sys/devices/system/node/node3/memory[0-9]*; do
  echo 0 >"$m/online" || fail "cannot take memory block ${m##*/} of node 3 offline"
done
assert_eq "node 3's MemTotal with its memory offline" 0 \
  "$(awk '/MemTotal/ { print $4 }' /sys/devices/system/node/node3/meminfo)"
assert_eq "the nodes with memory" 0-2 "$(cat /sys/devices/system/node/has_memory)"
assert_eq "QEMU's Mems_allowed_list" 0-2 "$(awk '/^Mems_allowed_list/ { print $2 }' "/proc/$pid/status")"
log "the VM's RAM on node 3 now: $(on_node "$pid" 3 200) permille; its policies: $(numa_maps_bind_nodes "$pid" | tr '\n' ';')"

off_3() { case $(claim_of "$pid") in *'"3"'*) return 1 ;; *) return 0 ;; esac; }
wait_for 60 off_3 || fail "the claim stayed on node 3: $(claim_of "$pid")"
claim=$(claim_of "$pid")
log "ok: the claim followed the pages: $claim"
assert_eq "the claim's total" 200 "$(echo "$claim" | jq '[.[]] | add')"
"$QP_BINARY" rebalance --dry-run --json --cooldown=0 >dry.json 2>dry.err || fail "rebalance --dry-run failed: $(cat dry.err)"
[ -s dry.err ] && fail "rebalance --dry-run printed on stderr: $(cat dry.err)"
id=$(cat /run/qemu-pin/*.json | jq -r --argjson p "$pid" 'select(.["qemu-pid"] == $p) | .id')
kept=$(jq -r --arg id "$id" '.kept[] | select(startswith($id + ":"))' dry.json)
placed=$(caller_placed)
log "status: caller-placed $placed; rebalance --dry-run keeps: '$kept'"
assert_eq "caller-placed of the VM after node 3 went offline" false "$placed"
assert_eq "the dry run's reason to keep the VM" "" "$kept"

assert_eq "keeper lines saying node 3 has no memory" 1 "$(grep -c 'node 3 has no memory online' off.err)"
grep -q "the caller allowed" off.err && fail "the keeper took node 3 going offline for the caller's: $(grep 'the caller allowed' off.err)"
log "keeper: $(grep 'node 3 has no memory online' off.err)"

# A move is not refused as the caller's: to a node of 0-2 the claim is not on.
from=$(echo "$claim" | jq -r 'keys[0]')
to=0
[ "$from" = 0 ] && to=1
"$QP_BINARY" move "$pid" --to-nodes=$to >move.out 2>move.err || fail "the move to node $to failed: $(cat move.err)"
assert_eq "the claim after the move" "{\"$to\":200}" "$(claim_of "$pid")"
assert_on_node "after the move" "$pid" "$to" 200

lab_cleanup
exit 0
