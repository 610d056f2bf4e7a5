# In-lab test (shape 4n): the ledger claims only memory a node really has
# (issue 26). A process bound with `numactl --membind=1` holds most of host
# node 1 (touched pages): status shows them outside claims there, and
# balanced and numa place their guests on other nodes although node 1 has
# the most uncommitted memory by total less claims (a first VM holds some of
# node 2). Asked for node 1 alone, balanced refuses in one line.
. "$QP_LAB_SRC/lib.sh"

expect_nodes 4
qp_require --mode=balanced
write_fw_halt fw.bin
py=/usr/bin/python3
[ -x "$py" ] || fail "$py is needed to hold memory on node 1"

node_free_mib() { awk '/MemFree:/ { print int($4 / 1024) }' "/sys/devices/system/node/node$1/meminfo"; }

# A small VM on node 2 and one on node 3: by total less claims, node 1 is
# now the roomiest of nodes 1-3.
for n in 2 3; do
  # shellcheck disable=SC2046
  set -- "$QP_QEMU" $(vm_args "small$n" fw.bin) -smp 1 -m 64
  p=$(qp_launch "small$n" --mode=balanced --hostnodes=$n -- "$@") || fail "qemu-pin did not launch a VM on node $n: $p"
done

# The hold is sized from what the kernel can give on node 1 (status's
# "available": MemFree less the node's reserve, plus what it can reclaim),
# not from MemFree: 48 MiB under MemFree left node 1 1 MiB above its
# reserve, where the holder's strict binding may stall or be killed.
# 40 MiB under what can be given leaves the kernel that much.
st=$(status_json) || fail "qemu-pin status failed"
free1=$(node_free_mib 1)
can1=$(jq -r '.nodes[] | select(.id == 1) | .["memory-mib"].available' "$st")
hold=$((can1 - 40))
[ "$hold" -gt 128 ] || fail "node 1 has only $can1 MiB available ($free1 MiB free): too little to hold most of it"
numactl --membind=1 "$py" -c "
import sys, time
x = bytearray(b'\x01') * ($hold << 20)
open(sys.argv[1], 'w').write('ready')
time.sleep(3600)" "$QP_LAB_SCRATCH/held" &
holder=$!
wait_for 60 test -s "$QP_LAB_SCRATCH/held" || fail "the holder did not take $hold MiB on node 1"
log "holding $hold MiB on node 1 ($can1 MiB were available, $free1 MiB free)"

st=$(status_json) || fail "qemu-pin status failed"
outside1=$(jq -r '.nodes[] | select(.id == 1) | .["memory-mib"]["outside-claims"]' "$st")
avail1=$(jq -r '.nodes[] | select(.id == 1) | .["memory-mib"].available' "$st")
unc1=$(jq -r '.nodes[] | select(.id == 1) | .["memory-mib"].total - .["memory-mib"].claimed' "$st")
[ "$outside1" -ge "$hold" ] || fail "status: node 1 has $outside1 MiB outside claims; expected at least the $hold held"
[ "$avail1" -lt 160 ] || fail "status: node 1 has $avail1 MiB available with $hold of its memory held"
log "ok: node 1: $outside1 MiB outside claims, $avail1 available ($unc1 by total less claims)"

# Guests a little larger than what node 1 can still give.
size=$((avail1 + 48))

# balanced, nodes 1-3: node 1 would win by total less claims.
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args bal fw.bin) -smp 1 -m $size
qp_plan --mode=balanced --hostnodes=1-3 -- "$@" >bal.json || fail "qemu-pin plan failed: $(cat bal.json)"
nb=$(jq -r '.["host-nodes"]' bal.json)
for x in $(list_expand "$nb"); do
  [ "$x" != 1 ] || fail "balanced planned on node 1, held by another process: $nb"
done
pid=$(qp_launch bal --mode=balanced --hostnodes=1-3 -- "$@") || fail "qemu-pin did not launch the balanced VM: $pid"
check_vm_or_fail "balanced VM beside held memory" bal.json "$pid"
log "ok: balanced went to node $nb"
kill "$pid"
wait_for 30 sh -c "! kill -0 $pid" || fail "the balanced VM (pid $pid) did not exit"
# Its keeper gives its claim back a moment after QEMU exits: until then
# the numa VM below is planned beside it.
log "the balanced VM's QEMU exited; its claim then: $(claim_of "$pid")"
bal_gone() { [ -z "$(claim_of "$pid")" ]; }
wait_for 30 bal_gone || fail "the balanced VM (pid $pid) is still claimed 30 s after it exited: $(claim_of "$pid")"
log "the balanced VM's claim is given back"

# numa, two guest nodes of that size, nodes 1-3.
sf=$(status_json) || fail "qemu-pin status failed"
log "numa: two guest nodes of $size MiB; a claim may take $(jq -c '[.nodes[] | {id, a: .["memory-mib"].available}]' "$sf")"
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args numa fw.bin) -smp 2 -m $((2 * size)) \
  -object memory-backend-ram,id=g0,size=${size}M -object memory-backend-ram,id=g1,size=${size}M \
  -numa node,nodeid=0,cpus=0,memdev=g0 -numa node,nodeid=1,cpus=1,memdev=g1
qp_plan --mode=numa --hostnodes=1-3 -- "$@" >numa.json || fail "qemu-pin plan failed: $(cat numa.json)"
used=$(jq -r '[.memory[] | .["host-nodes"]] | join(",")' numa.json)
for x in $(list_expand "$used"); do
  [ "$x" != 1 ] || fail "numa planned a guest node on host node 1, held by another process: $used"
done
pid2=$(qp_launch numa --mode=numa --hostnodes=1-3 -- "$@") || fail "qemu-pin did not launch the numa VM: $pid2"
check_vm_or_fail "numa VM beside held memory" numa.json "$pid2"
log "ok: numa went to nodes $used"

# Node 1 alone: refused in one line naming node 1 and what is used there.
# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args one fw.bin) -smp 1 -m $size
if "$QP_BINARY" --mode=balanced --hostnodes=1 -- "$@" -daemonize >one.out 2>&1; then
  fail "a $size MiB VM on node 1 started with $avail1 MiB available there"
fi
assert_eq "refusal: one line" 1 "$(wc -l <one.out)"
grep -q "node 1 has only" one.out || fail "refusal does not name node 1: $(cat one.out)"
grep -q "used outside any claim" one.out || fail "refusal does not say what is used outside claims: $(cat one.out)"
grep -q "$size MiB" one.out || fail "refusal does not say what was asked: $(cat one.out)"
log "ok: refused: $(cat one.out)"

kill "$holder"
lab_cleanup
exit 0
