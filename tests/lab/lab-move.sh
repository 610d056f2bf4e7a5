# In-lab test (shape 4n, 512 MiB per node): `qemu-pin move` of a running VM.
# A balanced 1-vCPU guest with 160 MiB preallocated (30% of a node) is moved
# to another node: afterwards at least 95% of its guest RAM is there
# (numa_maps), every thread of QEMU runs on that node's CPUs
# (Cpus_allowed_list), its claim names only that node, and a memory
# backend added over QMP after the move has its pages there too (the
# binding moved, not only the pages). A move onto a node without room
# (another VM claims most of it) exits non-zero with one line and leaves
# the VM, its pages and its claim where they were. A VM given memory after
# its start (object-add) moves with it, and the memory is claimed where it
# went, then given back from there. A move whose `qemu-pin
# move` is killed mid-way leaves one claim where the pages are, and the next
# move works. A VM whose memory can be plugged (-m maxmem) moves with its
# binding, a DIMM plugged after its move lands on the new node, and the
# next move takes the DIMM along. So does one with a virtio-mem device,
# whose growth after the move is claimed on the new node.
. "$QP_LAB_SRC/lib.sh"

. "$QP_LAB_SRC/../common/qmp-cmd.sh"

expect_nodes 4
qp_require --mode=balanced
write_fw_halt fw.bin
qmp=$QP_LAB_SCRATCH/mv.qmp
ram='{"qom-type":"memory-backend-ram","id":"pc.ram","size":167772160,"prealloc":true}'
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args mv fw.bin) -smp 1 -object "$ram" \
  -machine memory-backend=pc.ram -qmp "unix:$qmp,server=on,wait=off"
pid=$(qp_launch mv --mode=balanced -- "$@") || fail "qemu-pin did not launch the VM: $pid"


from=$(jq -r 'keys[0]' <<EOF
$(claim_of "$pid")
EOF
)
to=$(((from + 1) % 4))
assert_eq "before: guest RAM on node $from (permille)" 1000 "$(on_node "$pid" "$from" 160)"

"$QP_BINARY" move mv --to-nodes="$to" >move.out 2>move.err || fail "move failed: $(cat move.err)"
[ -s move.err ] && fail "a successful move printed on stderr: $(cat move.err)"
log "$(cat move.out)"
grep -q "binding moved too" move.out || fail "the binding did not move: $(cat move.out)"

assert_on_node "after the move" "$pid" "$to" 160
assert_eq "claim names only node $to" "{\"$to\":160}" "$(claim_of "$pid")"

# A backend added after the move: its pages land on the new node.
qmp_cmd "$qmp" object-add '{"qom-type": "memory-backend-ram", "id": "extra", "size": 33554432, "prealloc": true}' ||
  fail "object-add over QMP failed"
got=$(on_node "$pid" "$to" 32)
[ "$got" -ge 950 ] || fail "a backend added after the move has only $got permille on node $to"
# Memory given after the start is claimed (the keeper looks before a move,
# and every 10 s), and moves with the VM: its pages go, and the claim
# holds it on the destination.
ready() { [ "$(claim_of "$pid")" = "{\"$to\":192}" ]; }
wait_for 30 ready || fail "the backend added is not claimed beside the RAM on node $to: $(claim_of "$pid")"
"$QP_BINARY" move mv --to-nodes="$from" >given.out 2>given.err ||
  fail "the move of a VM given memory after its start failed: $(cat given.err)"
[ -s given.err ] && fail "a successful move printed on stderr: $(cat given.err)"
assert_eq "the VM given memory: claim names only node $from, its RAM and the backend" "{\"$from\":192}" "$(claim_of "$pid")"
got=$(on_node "$pid" "$from" 32)
[ "$got" -ge 950 ] || fail "the backend added before the move has only $got permille on node $from after it"
got=$(on_node "$pid" "$from" 160)
[ "$got" -ge 950 ] || fail "after the move of the VM given memory only $got permille of its RAM is on node $from"
# Deleted, it is given back from the node it moved to.
qmp_cmd "$qmp" object-del '{"id": "extra"}' || fail "object-del over QMP failed"
given_back() { [ "$(claim_of "$pid")" = "{\"$from\":160}" ]; }
wait_for 30 given_back || fail "the backend deleted after the move is not given back on node $from: $(claim_of "$pid")"
# The VM is on node $from now: the steps below start from there.
to=$from from=$(((from + 2) % 4))

# A move onto a node without room: refused in one line, nothing changed.
full=$(((to + 1) % 4))
# The filler takes all but 100 MiB of what a claim may take on that node
# (less than the 160 MiB the move needs), whatever the node's size.
sf=$(status_json) || fail "qemu-pin status --json failed"
room=$(jq --argjson n "$full" '.nodes[] | select(.id == $n) | .["memory-mib"] | (.available // .uncommitted)' "$sf")
[ "${room:-0}" -gt 200 ] || fail "node $full has only ${room:-?} MiB to claim: too small a lab node"
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args fill fw.bin) -smp 1 -m $((room - 100))
fpid=$(qp_launch fill --mode=balanced --hostnodes="$full" -- "$@") || fail "qemu-pin did not launch the filler: $fpid"
if "$QP_BINARY" move mv --to-nodes="$full" >nofit.out 2>nofit.err; then
  fail "a move onto node $full, which has no room, succeeded: $(cat nofit.out)"
fi
assert_eq "the refusal is one line" 1 "$(wc -l <nofit.err)"
log "refused: $(cat nofit.err)"
assert_eq "after the refusal: the claim stays on node $to" "{\"$to\":160}" "$(claim_of "$pid")"
assert_on_node "after the refusal" "$pid" "$to" 160

# A second move (the VM is in its cgroup now, its memory allowed only on
# node $to): back to node $from, pages and threads with it.
"$QP_BINARY" move mv --to-nodes="$from" >back.out 2>back.err || fail "the move back to node $from failed: $(cat back.err)"
assert_on_node "after the move back" "$pid" "$from" 160
assert_eq "after the move back: claim names only node $from" "{\"$from\":160}" "$(claim_of "$pid")"

# `qemu-pin move` killed mid-way (SIGKILL while pages move at 16 MiB/s,
# 10 s for 160 MiB): the keeper, which does the work, finishes or gives it
# up on its own; the record then claims one node, the one holding the
# pages, no node is over-committed, and a later move works.
"$QP_BINARY" move mv --to-nodes="$to" --rate=16 >killed.out 2>killed.err &
mover=$!
# Pages on the way: some on the destination, most not yet.
moving() {
  [ "$(claim_of "$pid" | jq 'keys | length')" = 2 ] &&
    _mv=$(on_node "$pid" "$to" 160) && [ "$_mv" -gt 0 ] && [ "$_mv" -lt 700 ]
}
wait_for 30 moving || fail "the slow move was never seen with pages on the way: $(claim_of "$pid"), $(on_node "$pid" "$to" 160) permille on node $to"
kill -9 "$mover"
wait "$mover" 2>/dev/null
mid=$(on_node "$pid" "$to" 160)
log "killed the move while the claim was $(claim_of "$pid"), $mid permille on node $to"
[ "$mid" -lt 950 ] || fail "the move had ended ($mid permille on node $to) before it was killed"
one_node() { [ "$(claim_of "$pid" | jq 'keys | length')" = 1 ]; }
wait_for 60 one_node || fail "after the killed move the claim stays $(claim_of "$pid")"
where=$(claim_of "$pid" | jq -r 'keys[0]')
assert_eq "after the killed move: the claim is the VM's 160 MiB" 160 "$(claim_of "$pid" | jq 'add')"
got=$(on_node "$pid" "$where" 160)
[ "$got" -ge 950 ] || fail "after the killed move the claim names node $where, which has $got permille of the guest RAM"
sf=$(status_json) || fail "qemu-pin status --json failed after the killed move"
jq -e '.nodes | all(.["memory-mib"] | .claimed <= .total - .reserve)' "$sf" >/dev/null ||
  fail "a node is over-committed after the killed move: $(jq -c '[.nodes[]["memory-mib"]]' "$sf")"
log "ok: after the killed move the VM is claimed on node $where with $got permille there"
other=$from
[ "$where" = "$from" ] && other=$to
"$QP_BINARY" move mv --to-nodes="$other" >again.out 2>again.err || fail "a move after the killed one failed: $(cat again.err)"
assert_eq "the move after the killed one: claim names only node $other" "{\"$other\":160}" "$(claim_of "$pid")"
got=$(on_node "$pid" "$other" 160)
[ "$got" -ge 950 ] || fail "after the move that followed the killed one only $got permille is on node $other"

# A VM whose memory can be plugged (-m maxmem): it moves, its binding with
# it (the lab's root cgroup has the cpuset controller), and a DIMM plugged
# after the move has its pages on the destination and is claimed there.
# Its RAM is preallocated: the guest touches none of it.
qmp=$QP_LAB_SCRATCH/mx.qmp
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args mx fw.bin) -smp 1 -m 96,slots=2,maxmem=512M \
  -object memory-backend-ram,id=pc.ram,size=96M,prealloc=on \
  -machine memory-backend=pc.ram -qmp "unix:$qmp,server=on,wait=off"
xpid=$(qp_launch mx --mode=balanced -- "$@") || fail "qemu-pin did not launch the VM with maxmem: $xpid"
xfrom=$(claim_of "$xpid" | jq -r 'keys[0]')
xto=$(((xfrom + 1) % 4))
[ "$xto" = "$full" ] && xto=$(((xto + 1) % 4))
[ "$xto" = "$xfrom" ] && xto=$(((xto + 1) % 4))
log "the VM with maxmem: claim $(claim_of "$xpid"), moving it to node $xto"
"$QP_BINARY" move mx --to-nodes="$xto" >mx.out 2>mx.err || fail "the move of the VM with maxmem failed: $(cat mx.err)"
[ -s mx.err ] && fail "a successful move printed on stderr: $(cat mx.err)"
grep -q "binding moved too" mx.out || fail "the binding of the VM with maxmem did not move: $(cat mx.out)"
got=$(on_node "$xpid" "$xto" 96)
[ "$got" -ge 950 ] || fail "after its move only $got permille of the maxmem VM's RAM is on node $xto"
assert_eq "the VM with maxmem: claim names only node $xto" "{\"$xto\":96}" "$(claim_of "$xpid")"
qmp_cmd "$qmp" object-add '{"qom-type": "memory-backend-ram", "id": "dimm1", "size": 50331648, "prealloc": true}' ||
  fail "object-add of the DIMM's backend failed"
qmp_cmd "$qmp" device_add '{"driver": "pc-dimm", "id": "d1", "memdev": "dimm1"}' ||
  fail "device_add of the DIMM failed"
got=$(on_node "$xpid" "$xto" 48)
[ "$got" -ge 950 ] || fail "a DIMM plugged after the move has only $got permille on node $xto"
plugged() { [ "$(claim_of "$xpid")" = "{\"$xto\":144}" ]; }
wait_for 30 plugged || fail "the DIMM plugged after the move is not claimed on node $xto: $(claim_of "$xpid")"
log "ok: the VM with maxmem moved to node $xto, and its DIMM plugged after is there and claimed"
# Moved again, the DIMM goes with it: its pages and its claim.
"$QP_BINARY" move mx --to-nodes="$xfrom" >mx2.out 2>mx2.err || fail "the move of the VM with a DIMM plugged failed: $(cat mx2.err)"
[ -s mx2.err ] && fail "a successful move printed on stderr: $(cat mx2.err)"
assert_eq "the VM with a DIMM plugged: claim names only node $xfrom" "{\"$xfrom\":144}" "$(claim_of "$xpid")"
got=$(on_node "$xpid" "$xfrom" 48)
[ "$got" -ge 950 ] || fail "the DIMM plugged before the move has only $got permille on node $xfrom after it"
log "ok: the VM with a DIMM plugged moved to node $xfrom with the DIMM"

# A VM with a virtio-mem device moves too (its binding moves with it): its
# claim, the RAM and the device's requested-size (raised over QMP after the
# start; the firmware has no driver, so QEMU only records the request),
# goes to the new node, and what the device is resized to after the move is
# claimed there. An unused backend of its command line, preallocated, moves
# with it, and deleted after the move it is given back from the new node.
qmp=$QP_LAB_SCRATCH/vmem.qmp
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args vmem fw.bin) -smp 1 -m 64,maxmem=512M \
  -object memory-backend-ram,id=vmb,size=128M -device virtio-mem-pci,id=vmem0,memdev=vmb,requested-size=32M \
  -object memory-backend-ram,id=spare,size=16M,prealloc=on \
  -qmp "unix:$qmp,server=on,wait=off"
vpid=$(qp_launch vmem --mode=balanced -- "$@") || fail "qemu-pin did not launch the VM with virtio-mem: $vpid"
vfrom=$(claim_of "$vpid" | jq -r 'keys[0]')
assert_eq "the VM with virtio-mem: RAM, requested-size and the unused backend claimed" "{\"$vfrom\":112}" "$(claim_of "$vpid")"
resize() {
  qmp_cmd "$qmp" qom-set "{\"path\": \"/machine/peripheral/vmem0\", \"property\": \"requested-size\", \"value\": $1}" ||
    fail "qom-set of requested-size $1 failed"
}
resize 50331648
grown() { [ "$(claim_of "$vpid")" = "{\"$vfrom\":128}" ]; }
wait_for 30 grown || fail "virtio-mem resized to 48 MiB is not claimed: $(claim_of "$vpid")"
# The destination: the node with the most room to claim but the VM's own
# (the steps above leave nodes with little).
sf=$(status_json) || fail "qemu-pin status --json failed"
vto=$(jq --argjson f "$vfrom" '[.nodes[] | select(.id != $f) | {id, room: (.["memory-mib"] | (.available // .uncommitted))}] | max_by(.room) | .id' "$sf")
"$QP_BINARY" move vmem --to-nodes="$vto" >vmem.out 2>vmem.err || fail "the move of the VM with virtio-mem failed: $(cat vmem.err)"
[ -s vmem.err ] && fail "a successful move printed on stderr: $(cat vmem.err)"
assert_eq "the VM with virtio-mem: claim names only node $vto" "{\"$vto\":128}" "$(claim_of "$vpid")"
resize 67108864
regrown() { [ "$(claim_of "$vpid")" = "{\"$vto\":144}" ]; }
wait_for 30 regrown || fail "virtio-mem resized after the move is not claimed on node $vto: $(claim_of "$vpid")"
got=$(on_node "$vpid" "$vto" 16)
[ "$got" -ge 950 ] || fail "the unused backend has only $got permille on node $vto after the move"
qmp_cmd "$qmp" object-del '{"id": "spare"}' || fail "object-del of the unused backend failed"
spared() { [ "$(claim_of "$vpid")" = "{\"$vto\":128}" ]; }
wait_for 30 spared || fail "the unused backend deleted after the move is not given back on node $vto: $(claim_of "$vpid")"
log "ok: the VM with virtio-mem moved to node $vto, and its growth after is claimed there"
lab_cleanup
exit 0
