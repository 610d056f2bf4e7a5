# In-lab test (shape 4n, ~450 MiB per node): moves that depend on where
# and how the VM was started, checked against the ledger and /proc.
#
# 1. A VM's own pages are room for itself. Four fillers (preallocated)
#    leave 170 MiB on each node; a balanced VM of 300 MiB,
#    preallocated, then spans nodes. Once the filler of the node holding
#    most of it exits, that node has room for the whole VM only with the
#    pages it holds there counted as its own: `rebalance` plans the VM
#    onto it (the planner counts them so) and makes the move (before the
#    fix the keeper, planning with the VM's record left out, counted them
#    as memory used outside any claim and refused: "VM does not fit", and
#    the rebalance stopped, exit 1). The VM is then claimed on that node
#    only, its RAM (numa_maps) and threads there; a `move` onto the node it
#    is on places it again, exit 0.
# 2. A VM started under `taskset -c` (CPUs of one node) whose memory spans
#    two nodes is moved neither by `move` to a node outside those CPUs
#    (one line naming the CPUs it was started inside, exit 1, its claim
#    unchanged) nor by `rebalance`, which plans it as fixed and exits 0.
. "$QP_LAB_SRC/lib.sh"

expect_nodes 4
qp_require --mode=balanced
write_fw_halt fw.bin

room_of() {
  _sf=$(status_json) || fail "qemu-pin status --json failed"
  jq --argjson n "$1" '.nodes[] | select(.id == $n) | .["memory-mib"] | (.available // .uncommitted)' "$_sf"
}
gone() { [ -z "$(claim_of "$1")" ]; }
# settled N: no more than 32 MiB claimed on node N is not resident yet
# (the keeper measured its VM's pages there), so that the room the planner
# sees is what the node has.
settled() {
  _sf=$(status_json) || return 1
  jq -e --argjson n "$1" '.nodes[] | select(.id == $n) | .["memory-mib"].outstanding < 32' "$_sf" >/dev/null
}
# prealloc NAME MIB [QEMU-PIN OPTIONS]: a balanced VM with MIB preallocated.
prealloc() {
  _n=$1 _m=$2
  shift 2
  ram="{\"qom-type\":\"memory-backend-ram\",\"id\":\"pc.ram\",\"size\":$((_m * 1048576)),\"prealloc\":true}"
  # shellcheck disable=SC2046
  qp_launch "$_n" --mode=balanced "$@" -- "$QP_QEMU" $(vm_args "$_n" fw.bin) -smp 1 \
    -object "$ram" -machine memory-backend=pc.ram
}
# filler N LEAVE: a VM holding all but LEAVE MiB of what node N has to
# claim, preallocated: a claim whose pages are not there yet leaves the
# kernel free to put another VM's pages in its room.
filler() {
  _r=$(room_of "$1")
  [ "${_r:-0}" -gt $(($2 + 100)) ] || fail "node $1 has only ${_r:-?} MiB to claim"
  log "node $1: $_r MiB to claim, a filler of $((_r - $2)) MiB" >&2
  prealloc "f$1" $((_r - $2)) --hostnodes="$1"
}

# ---- 1. The VM's own pages on the destination --------------------------------
for n in 0 1 2 3; do
  p=$(filler "$n" 170) || fail "qemu-pin did not launch the filler of node $n: $p"
  eval "f$n=$p"
done
sp=$(prealloc sp 300) || fail "qemu-pin did not launch the 300 MiB VM: $sp"
c=$(claim_of "$sp")
log "the 300 MiB VM: claim $c"
[ "$(echo "$c" | jq 'keys | length')" -ge 2 ] || fail "the 300 MiB VM does not span nodes: $c"
a=$(echo "$c" | jq -r 'to_entries | max_by(.value) | .key')
have=$(echo "$c" | jq --arg a "$a" '.[$a]')
eval "kill \$f$a"
eval "wait_for 30 gone \$f$a" || fail "the filler of node $a is still claimed"
log "the filler of node $a exited; the VM holds $have MiB there"
wait_for 60 settled "$a" || fail "the keeper never measured the VM's pages on node $a: $(jq -c '[.nodes[]["memory-mib"]]' "$(status_json)")"

"$QP_BINARY" rebalance --dry-run --json >dry.json 2>dry.err || fail "rebalance --dry-run failed: $(cat dry.err)"
log "dry run: $(jq -c . dry.json)"
assert_eq "the dry run moves the VM onto node $a, where it holds $have MiB" \
  "[{\"to\":\"$a\",\"mib\":$((300 - have))}]" "$(jq -c '[.moves[] | {to, mib}]' dry.json)"
"$QP_BINARY" rebalance >made.out 2>made.err || fail "rebalance failed: $(cat made.err)"
[ -s made.err ] && fail "rebalance printed on stderr: $(cat made.err)"
log "$(cat made.out)"
assert_eq "after the rebalance: the VM is claimed on node $a only" "{\"$a\":300}" "$(claim_of "$sp")"
assert_on_node "after the rebalance" "$sp" "$a" 300
# Placed again where it is: its 300 MiB there are its own.
"$QP_BINARY" move sp --to-nodes="$a" >again.out 2>again.err || fail "the move onto the VM's own node failed: $(cat again.err)"
grep -q "^qemu-pin: moved VM sp .* from nodes $a to $a: " again.out || fail "move onto its own node said: $(cat again.out)"
assert_eq "placed again: the claim stays" "{\"$a\":300}" "$(claim_of "$sp")"
kill "$sp"
for n in 0 1 2 3; do eval "kill \$f$n" 2>/dev/null; done
wait_for 30 gone "$sp" || fail "the 300 MiB VM is still claimed after it exited"
# The fillers' keepers give their claims back a moment after their QEMUs
# exit: node 2's room is read for the next filler only once they have.
log "the 300 MiB VM's claim is gone; VMs still claimed then: $(jq -c '[.vms[] | .name]' "$(status_json)")"
no_vms() { [ "$(jq '.vms | length' "$(status_json)")" = 0 ]; }
wait_for 30 no_vms || fail "VMs still claimed 30 s after they were killed: $(jq -c '[.vms[] | .name]' "$(status_json)")"

# ---- 2. A VM started under taskset -c ----------------------------------------
cpus=$(node_cpus 2)
f2=$(filler 2 100) || fail "qemu-pin did not launch the filler of node 2: $f2"
rm -f "$QP_LAB_SCRATCH/ts.pid"
ram='{"qom-type":"memory-backend-ram","id":"pc.ram","size":167772160,"prealloc":true}'
# shellcheck disable=SC2046
taskset -c "$cpus" "$QP_BINARY" --mode=balanced -- "$QP_QEMU" $(vm_args ts fw.bin) -smp 1 \
  -object "$ram" -machine memory-backend=pc.ram -daemonize -pidfile "$QP_LAB_SCRATCH/ts.pid" >ts.out 2>&1 ||
  fail "qemu-pin under taskset -c $cpus did not launch the VM: $(cat ts.out)"
ts=$(cat "$QP_LAB_SCRATCH/ts.pid")
echo "$ts" >>"$QP_LAB_SCRATCH/launched.pids"
c=$(claim_of "$ts")
log "the VM started under taskset -c $cpus: claim $c"
[ "$(echo "$c" | jq 'keys | length')" -ge 2 ] || fail "the VM started under taskset does not span nodes: $c"
for t in /proc/"$ts"/task/*; do
  assert_eq "taskset VM thread ${t##*/} on CPUs $cpus" "$cpus" "$(cpus_allowed_of "${t##*/}")"
done
to=0
"$QP_BINARY" move ts --to-nodes=$to >ts-move.out 2>ts-move.err
assert_eq "move of the VM started under taskset: exit status" 1 $?
assert_eq "its refusal is one line" 1 "$(wc -l <ts-move.err)"
grep -q "^qemu-pin: move refused: the VM was started inside CPUs $cpus .*: nodes $to have none of them" ts-move.err ||
  fail "the refusal does not name the CPUs the VM was started inside: $(cat ts-move.err)"
log "refused: $(cat ts-move.err)"
assert_eq "after the refusal: its claim is unchanged" "$c" "$(claim_of "$ts")"
"$QP_BINARY" rebalance -v --cooldown=0 >ts-rb.out 2>ts-rb.err ||
  fail "rebalance stopped at the VM started under taskset: $(cat ts-rb.err)"
log "rebalance -v said: $(tr '\n' ';' <ts-rb.err) $(cat ts-rb.out)"
assert_eq "after the rebalance: its claim is unchanged" "$c" "$(claim_of "$ts")"
for t in /proc/"$ts"/task/*; do
  assert_eq "after the rebalance: thread ${t##*/} on CPUs $cpus" "$cpus" "$(cpus_allowed_of "${t##*/}")"
done
lab_cleanup
exit 0
