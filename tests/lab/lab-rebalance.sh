# In-lab test (shape 4n, ~500 MiB per node): `qemu-pin rebalance`. Four
# balanced 1-vCPU VMs of half a node each (40% of what a node can claim:
# the rest must still hold one of them beside it with two QEMUs' own
# memory, which the ledger counts as used outside claims), spread one
# per node, and one more of 30% beside one of them, all preallocated. A VM
# of about 65% of a node (more than any node has uncommitted once the five
# run, less than a node has once its VM of half a node leaves) then fits on
# no node: its plan spans two. `rebalance
# --dry-run --json -- ...` lists the moves and changes nothing; `rebalance
# -- ...` makes them; then `plan --json` puts that VM on one node, and
# every VM is claimed on one node, its threads run on that node's CPUs
# (Cpus_allowed_list) and its guest RAM is there (numa_maps). Before that
# rebalance the test pins vCPU 0 of the VM the dry run moves first with
# taskset: that VM is never moved (its keeper refuses, or its record says
# "caller-placed" already), the rebalance plans again without it, makes
# other moves and exits 0. With
# QP_LAB_MAKE_ROOM=1 (lab-make-room.sh) the big VM is launched with
# --make-room instead of `rebalance -- ...`: it lands on one node, and the
# VM it moved has its claim, threads and pages on its new node.
. "$QP_LAB_SRC/lib.sh"

expect_nodes 4
qp_require --mode=balanced
write_fw_halt fw.bin

sf=$(status_json) || fail "qemu-pin status --json failed"
room=$(jq '[.nodes[]["memory-mib"] | (.available // .uncommitted)] | min' "$sf")
[ "${room:-0}" -gt 300 ] || fail "a node has only ${room:-?} MiB to claim: too small a lab node"
half=$((room * 40 / 100))
third=$((room * 30 / 100))
log "nodes hold $room MiB to claim: VMs of $half and $third MiB"

# launch NAME MIB: a balanced VM with MIB preallocated; its pid.
launch() {
  ram="{\"qom-type\":\"memory-backend-ram\",\"id\":\"pc.ram\",\"size\":$(($2 * 1048576)),\"prealloc\":true}"
  # shellcheck disable=SC2046
  qp_launch "$1" --mode=balanced -- "$QP_QEMU" $(vm_args "$1" fw.bin) -smp 1 \
    -object "$ram" -machine memory-backend=pc.ram
}

claims() { # the live claims: "PID NODES" per VM
  _sf=$(status_json) || fail "qemu-pin status --json failed"
  jq -r '.vms[] | "\(.["qemu-pid"]) \(.["memory-mib"] | keys | join(","))"' "$_sf" | sort
}

# settle: waits until every VM's keeper has measured its pages (no node
# has more than 32 MiB claimed but not resident), so that the room the
# planner sees is what the nodes really have.
settled() {
  _sf=$(status_json) || return 1
  jq -e '[.nodes[]["memory-mib"].outstanding] | max < 32' "$_sf" >/dev/null
}
rooms() {
  _sf=$(status_json) || fail "qemu-pin status --json failed"
  jq -c '[.nodes[]["memory-mib"] | {u: (.available // .uncommitted), o: .["outside-claims"]}]' "$_sf"
}

pids=""
sizes=""
for v in a b c d; do
  p=$(launch "$v" "$half") || fail "qemu-pin did not launch VM $v: $p"
  pids="$pids $p"
  sizes="$sizes $p:$half"
done
c1=$(claims)
log "after the four: $(echo "$c1" | tr '\n' ';')"
assert_eq "the four VMs are one per node" "0,1,2,3" "$(echo "$c1" | awk '{print $2}' | sort -n | paste -sd, -)"
p=$(launch e "$third") || fail "qemu-pin did not launch VM e: $p"
pids="$pids $p"
sizes="$sizes $p:$third"
wait_for 60 settled || log "the keepers' measures did not settle: $(rooms)"
log "nodes now (uncommitted, outside claims): $(rooms)"
# The big VM: more than any node has uncommitted now (about 65% of a node),
# less than a node will have once the VM of half a node on it moves away.
sf=$(status_json) || fail "qemu-pin status --json failed"
most=$(jq '[.nodes[]["memory-mib"] | (.available // .uncommitted)] | max' "$sf")
big=$((most + half / 2))
log "the big VM: $big MiB (the most a node has uncommitted: $most MiB)"

# shellcheck disable=SC2046
set -- "$QP_QEMU" $(vm_args big fw.bin) -smp 1 -m "$big"
"$QP_BINARY" plan --mode=balanced -- "$@" >plan0.json 2>plan0.err
rc=$?
if [ $rc -eq 0 ]; then
  nodes0=$(jq -r '.["host-nodes"]' plan0.json)
  case $nodes0 in
    *,* | *-*) log "before: the $big MiB VM's plan spans nodes $nodes0" ;;
    *) fail "before any move the $big MiB VM already fits on node $nodes0" ;;
  esac
else
  log "before: the $big MiB VM is refused: $(cat plan0.err)"
fi

before=$(claims)
"$QP_BINARY" rebalance --dry-run --json --mode=balanced -- "$@" >dry.json 2>dry.err ||
  fail "rebalance --dry-run failed: $(cat dry.err)"
[ -s dry.err ] && fail "rebalance --dry-run printed on stderr: $(cat dry.err)"
log "dry run: $(jq -c '.moves' dry.json), kept: $(jq -c '.kept' dry.json)"
nmoves=$(jq '.moves | length' dry.json)
[ "$nmoves" -ge 1 ] || fail "rebalance --dry-run lists no move"
jq -e '.moves | all(has("vm") and has("from") and has("to") and (.mib > 0))' dry.json >/dev/null ||
  fail "a move lacks vm, from, to or mib: $(jq -c '.moves' dry.json)"
dry_nodes=$(jq -r '.plan["host-nodes"]' dry.json)
case $dry_nodes in
  *,* | *-* | null | "") fail "after the dry run's moves the plan is on '$dry_nodes', not one node" ;;
esac
assert_eq "the dry run changed no claim" "$before" "$(claims)"

if [ "${QP_LAB_MAKE_ROOM:-0}" = 1 ]; then
  # lab-make-room.sh: the big VM launched with --make-room makes the moves
  # itself, says nothing, and lands on one node.
  bpid=$(qp_launch big --make-room --mode=balanced -- "$@") || fail "the --make-room launch failed: $bpid"
  wait_for 60 settled || log "the keepers' measures did not settle: $(rooms)"
  assert_eq "the --make-room launch said nothing" "" "$(cat "$QP_LAB_SCRATCH/big.out")"
  nodes1=$(claims | awk -v p="$bpid" '$1 == p { print $2 }')
  case $nodes1 in
    [0-9]) ;;
    *) fail "the $big MiB VM launched with --make-room is claimed on '$nodes1', not one node" ;;
  esac
  want=$(node_cpus "$nodes1")
  for t in /proc/"$bpid"/task/*; do
    assert_eq "the big VM's thread ${t##*/} on node $nodes1's CPUs" "$want" "$(cpus_allowed_of "${t##*/}")"
  done
  log "after: the $big MiB VM runs on node $nodes1"
  [ "$before" != "$(claims | grep -v "^$bpid ")" ] || fail "--make-room moved no VM, yet the big VM is on one node"
  vms=6
else
  # The caller pins vCPU 0 of the VM the dry run moves first to one CPU of
  # its node (taskset, as `virsh vcpupin` on a running VM), right before
  # the rebalance: its keeper marks its record "caller-placed" at its next
  # look (every 5 s), so the rebalance most likely still plans to move it,
  # and its keeper refuses. The rebalance then plans again without it and
  # makes the other moves: that VM stays where it is, pinned as the caller
  # left it, and the big VM still fits on one node.
  pinned_id=$(jq -r '.moves[0].vm' dry.json)
  sf=$(status_json) || fail "qemu-pin status --json failed"
  pinned=$(jq -r --arg id "$pinned_id" '.vms[] | select(.id == $id) | .["qemu-pid"]' "$sf")
  pinned_node=$(echo "$before" | awk -v p="$pinned" '$1 == p { print $2 }')
  pinned_cpu=$(node_cpus "$pinned_node" | sed 's/[-,].*//')
  pinned_tid=$(vcpu_threads "$pinned" | awk '$1 == 0 { print $2 }')
  [ -n "$pinned_tid" ] || fail "VM $pinned has no vCPU 0 thread"
  taskset -pc "$pinned_cpu" "$pinned_tid" >/dev/null || fail "taskset of VM $pinned's vCPU 0 failed"
  log "the caller pinned vCPU 0 of VM $pinned (node $pinned_node) to CPU $pinned_cpu"
  # -v: its lines say whether the keeper refused (and the rebalance planned
  # again) or the record kept the VM out from the start; no warning.
  "$QP_BINARY" rebalance -v --mode=balanced -- "$@" >made.out 2>made.err ||
    fail "rebalance failed: $(cat made.err)"
  wait_for 60 settled || log "the keepers' measures did not settle: $(rooms)"
  grep -v "^qemu-pin: " made.err | grep -q . && fail "rebalance printed on stderr: $(cat made.err)"
  grep -q "^qemu-pin: warning: " made.err && fail "rebalance warned: $(cat made.err)"
  log "rebalance -v said: $(tr '\n' ';' <made.err)"
  if grep -q "^qemu-pin: rebalance: VM [^ ]* ($pinned_id) not moved: move refused: the caller pinned vCPU 0 itself" made.err; then
    log "its keeper refused the move and the rebalance planned again without it"
  else
    log "its record said caller-placed before the rebalance read it"
  fi
  log "$(cat made.out)"
  nmade=$(grep -c "^qemu-pin: moved VM " made.out)
  [ "$nmade" -ge 1 ] || fail "rebalance made no move: $(cat made.out)"
  assert_eq "one line per move made and the plan line" $((nmade + 1)) "$(wc -l <made.out)"
  grep -q "^qemu-pin: moved VM [^ ]* ($pinned_id)" made.out && fail "rebalance moved VM $pinned, which the caller pinned"
  grep -q "^qemu-pin: plan: mode balanced on host node [0-9] (1 node; " made.out ||
    fail "no plan line for one node: $(cat made.out)"
  assert_eq "the pinned VM's record is caller-placed" true \
    "$(jq -r --arg id "$pinned_id" '.vms[] | select(.id == $id) | .["caller-placed"]' "$(status_json)")"
  assert_eq "the pinned VM is still claimed on node $pinned_node" "$pinned_node" \
    "$(claims | awk -v p="$pinned" '$1 == p { print $2 }')"

  "$QP_BINARY" plan --mode=balanced -- "$@" >plan1.json 2>plan1.err || fail "plan after the moves failed: $(cat plan1.err)"
  nodes1=$(jq -r '.["host-nodes"]' plan1.json)
  case $nodes1 in
    *,* | *-*) fail "after rebalance the $big MiB VM still spans nodes $nodes1" ;;
  esac
  log "after: the $big MiB VM's plan is on node $nodes1"

  vms=5
fi

# Every VM: claimed on one node, its threads there, its guest RAM there.
after=$(claims)
assert_eq "$vms VMs in the ledger" "$vms" "$(echo "$after" | wc -l)"
for ps in $sizes; do
  pid=${ps%%:*}
  mib=${ps#*:}
  node=$(echo "$after" | awk -v p="$pid" '$1 == p { print $2 }')
  case $node in
    [0-9]) ;;
    *) fail "VM $pid is claimed on '$node', not one node" ;;
  esac
  want=$(node_cpus "$node")
  for t in /proc/"$pid"/task/*; do
    if [ "${t##*/}" = "${pinned_tid:-}" ]; then
      assert_eq "VM $pid vCPU 0 where the caller pinned it" "$pinned_cpu" "$(cpus_allowed_of "${t##*/}")"
      continue
    fi
    assert_eq "VM $pid thread ${t##*/} on node $node's CPUs" "$want" "$(cpus_allowed_of "${t##*/}")"
  done
  got=$(on_node "$pid" "$node" "$mib")
  [ "$got" -ge 950 ] || fail "VM $pid has only $got permille of its guest RAM on node $node"
  log "ok: VM $pid on node $node, $got permille of its RAM there"
done
lab_cleanup
exit 0
