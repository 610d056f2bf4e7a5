#!/bin/sh
# `qemu-pin move` when a request is not made or a move stops part-way, with
# real QEMU (paused guests, -S) on this one-node host:
# - a request whose client was killed while it waited behind another move
#   is dropped by the keeper, which says so in its -v log and changes
#   nothing (it used to make that move later);
# - a move that fails once the destination is claimed beside the source,
#   and one the caller stops by pinning a vCPU while the pages move, leave
#   the record claiming the nodes that hold the guest memory (as numa_maps
#   counts it), never less than is there (they used to leave it claiming
#   source and destination for good).
# The last two run on a recorded two-node host whose node 1 this host lacks
# (QEMU_PIN_TEST_LAUNCH_ON_TOPOLOGY), so moving pages there fails, and a VM
# that spans it has all its pages on node 0. Moves between real nodes:
# tests/lab/lab-move.sh.
set -u
. "$QP_SOURCE_ROOT/tests/common/tap-vm.sh"

vm() { echo "-name $1,debug-threads=on -machine q35 -accel tcg -display none -nodefaults -S -smp 1"; }
record() { cat "$SD"/*.json 2>/dev/null | jq -c --arg n "$1" 'select(.name == $n)'; }
placed() { record "$1" | jq -c '[.["memory-mib"], .["moved-at"]]'; }
# wait_for CMD...: up to 30 s until CMD succeeds.
wait_for() {
  i=0
  until "$@"; do
    i=$((i + 1))
    [ $i -ge 300 ] && return 1
    sleep 0.1
  done
}
no_record() { [ -z "$(record "$1")" ]; }
# start NAME [QEMU-PIN OPTIONS] -- QEMU ARGS: a VM run in place in the
# background with -v, so that its keeper's log is $T/NAME.log (a daemon's
# keeper logs nowhere once the launch returns); QEMU's pid in $T/NAME.pid.
start() {
  name=$1
  shift
  "$QP_BINARY" -v --state-dir="$SD" "$@" -pidfile "$T/$name.pid" \
    </dev/null >/dev/null 2>"$T/$name.log" &
  looked() { grep -q "keeper: .*: pinned [0-9]* threads" "$T/$name.log"; }
  wait_for looked || { cat "$T/$name.log" >&2; return 1; }
}
in_log() { grep -c "$2" "$T/$1.log"; }

# The guest memory per node of QEMU PID as the move's check counts it
# (numa_maps: the mappings with a policy, else every anonymous one), in KiB:
# "NODE KIB" lines, nodes without any left out.
guest_kib() {
  awk '{
    bound = $2 != "default"; anon = 0; kib = 4
    for (i = 3; i <= NF; i++) {
      if ($i ~ /^kernelpagesize_kB=/) { split($i, a, "="); kib = a[2] }
      if ($i ~ /^anon=/) anon = 1
    }
    for (i = 3; i <= NF; i++)
      if ($i ~ /^N[0-9]+=/) {
        split(substr($i, 2), a, "=")
        if (bound) b[a[1]] += a[2] * kib
        else if (anon) u[a[1]] += a[2] * kib
        if (bound) nb++
      }
  }
  END {
    if (nb > 0) for (k in b) { if (b[k] > 0) print k, b[k] }
    else for (k in u) { if (u[k] > 0) print k, u[k] }
  }' /proc/"$1"/numa_maps | sort -n
}
# What a record claims and holds after a stopped move, against numa_maps:
# the nodes it claims memory on are those with guest memory, each claimed
# for at least what is there.
settled() { # LABEL NAME PID
  got=$(record "$2" | jq -r '.["memory-mib"] | keys | map(tonumber) | sort | map(tostring) | join(",")')
  check "$1: the record claims memory on the nodes that hold the guest memory" \
    "$(guest_kib "$3" | cut -d' ' -f1 | paste -sd, -)" "$got"
  guest_kib "$3" | while read -r node kib; do
    mib=$(record "$2" | jq --arg n "$node" '.["memory-mib"][$n] // 0')
    if [ $((mib * 1024)) -ge "$kib" ]; then echo ok; else echo "node $node: $mib MiB claimed, $kib KiB there"; fi
  done >"$T/cover"
  check "$1: no node claimed for less than is on it" "" "$(grep -v '^ok$' "$T/cover")"
}

# ---- A request whose client is gone ---------------------------------------
# VM w's keeper waits 3 s inside each move (QEMU_PIN_TEST_MOVE_PAUSE_MS): a
# second `qemu-pin move` waits behind the first, and is killed once it has
# sent its request and waits for the answer (in poll(2)).
# shellcheck disable=SC2046
QEMU_PIN_TEST_MOVE_PAUSE_MS=3000 start w --mode=balanced -- "$QEMU" $(vm w) -m 64 ||
  { echo "Bail out! cannot launch VM w"; exit 1; }
before=$(placed w)
"$QP_BINARY" move --state-dir="$SD" w --to-nodes=0 >"$T/ma.out" 2>"$T/ma.err" &
first=$!
claimed_once() { [ "$(in_log w 'move: claimed the destination beside the source')" -ge 1 ]; }
wait_for claimed_once || not_ok "the first move did not start: $(cat "$T/w.log")"
"$QP_BINARY" move --state-dir="$SD" w --to-nodes=0 >"$T/mb.out" 2>"$T/mb.err" &
second=$!
polling() { case $(cut -d' ' -f1 /proc/"$second"/syscall 2>/dev/null) in 7 | 271) return 0 ;; esac; return 1; }
wait_for polling || not_ok "the second move never waited for its answer"
kill -KILL "$second"
wait "$second" 2>/dev/null
wait "$first"
check "queued, client gone: the first move is made" 0 $?
# The keeper has come to the second request: it dropped it, or made it.
came() { [ "$(in_log w 'dropped: its client')" -ge 1 ] || [ "$(in_log w 'move: claimed the destination')" -ge 2 ]; }
wait_for came
grep -q "move request {\"to-nodes\": \"0\", \"rate-mib\": [0-9]*} dropped: its client (pid $second) is gone, nothing changed" "$T/w.log" &&
  ok "queued, client gone: the keeper's log says the request was dropped" ||
  not_ok "queued, client gone: keeper log: $(grep 'move' "$T/w.log" | tr '\n' '|')"
check "queued, client gone: the keeper made one move only" 1 "$(in_log w 'move: claimed the destination beside the source')"
check "queued, client gone: the record's memory and moved-at are unchanged" "$before" "$(placed w)"
kill "$(cat "$T/w.pid")"
wait_for no_record w

# ---- Moves that stop part-way ---------------------------------------------
# A recorded host: node 0 (CPU 0, 2048 MiB) and node 1 (CPU 1, MIB1 MiB).
two_nodes() { # MIB1
  m0=$((2048 * 1048576))
  m1=$(($1 * 1048576))
  cat <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" allowed_cpuset="0x00000003" nodeset="0x00000003" complete_nodeset="0x00000003" allowed_nodeset="0x00000003" gp_index="1">
    <object type="Package" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="5">
      <object type="NUMANode" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="4" local_memory="$m0">
        <page_type size="4096" count="$((m0 / 4096))"/>
      </object>
      <object type="Core" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="3">
        <object type="PU" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="2"/>
      </object>
    </object>
    <object type="Package" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="9">
      <object type="NUMANode" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="8" local_memory="$m1">
        <page_type size="4096" count="$((m1 / 4096))"/>
      </object>
      <object type="Core" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="7">
        <object type="PU" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="6"/>
      </object>
    </object>
  </object>
  <support name="discovery.pu"/>
  <support name="discovery.numa"/>
  <support name="discovery.numa_memory"/>
</topology>
EOF
}

if [ "$(getconf _NPROCESSORS_ONLN)" -lt 2 ] || [ ! -d /sys/devices/system/node/node0 ] ||
  [ -d /sys/devices/system/node/node1 ] || [ ! -r /proc/self/numa_maps ]; then
  skip "stopped moves: need 2 CPUs, NUMA node 0 and no node 1 (a one-node host)"
  echo "1..$n"
  exit $failed
fi
two_nodes 2048 >"$T/even.xml"
two_nodes 512 >"$T/uneven.xml"
export QEMU_PIN_TEST_LAUNCH_ON_TOPOLOGY=1

# A move that fails after phase one: VM t's memory is on node 0 (bound
# there); moving it to node 1, which this host lacks, fails in move_pages.
# shellcheck disable=SC2046
start t --topology="$T/even.xml" --mode=balanced -- "$QEMU" $(vm t) -m 64 ||
  { echo "Bail out! cannot launch VM t"; exit 1; }
check "failed move: VM t claims node 0 only before" '["0"]' "$(record t | jq -c '.["memory-mib"] | keys')"
before=$(record t | jq -c '[.["memory-mib"], .load, .["dedicated-cpus"], .["moved-at"]]')
QEMU_PIN_TOPOLOGY="$T/even.xml" "$QP_BINARY" move --state-dir="$SD" t --to-nodes=1 >"$T/mt.out" 2>"$T/mt.err"
check "failed move: exit status" 1 $?
check "failed move: one line on stderr" 1 "$(wc -l <"$T/mt.err")"
grep -q "^qemu-pin: move: move_pages of QEMU (pid $(cat "$T/t.pid")): .*; the record claims [0-9]* MiB on node 0, where the guest memory is$" "$T/mt.err" &&
  ok "failed move: said, with what the record claims" || not_ok "failed move: $(cat "$T/mt.err")"
settled "failed move" t "$(cat "$T/t.pid")"
check "failed move: the record is as before the move (memory, load, CPUs, moved-at)" "$before" \
  "$(record t | jq -c '[.["memory-mib"], .load, .["dedicated-cpus"], .["moved-at"]]')"
grep -q "move stopped: the record claims" "$T/t.log" && ok "failed move: the keeper's log says what the record claims" ||
  not_ok "failed move: keeper log: $(grep 'move' "$T/t.log" | tr '\n' '|')"
kill "$(cat "$T/t.pid")"
wait_for no_record t

# The caller pins a vCPU while the pages move: VM z spans nodes 0 and 1 (a
# filler VM f holds most of node 0 as z starts), its pages all on node 0
# (node 1's binding the kernel cannot give); f gone, z moves to node 0 and
# its keeper waits 5 s after the pages moved, meanwhile the caller pins.
# shellcheck disable=SC2046
start f --topology="$T/uneven.xml" --mode=balanced -- "$QEMU" $(vm f) -m 1536 ||
  { echo "Bail out! cannot launch VM f"; exit 1; }
# shellcheck disable=SC2046
QEMU_PIN_TEST_MOVE_PAUSE_MS=5000 start z --topology="$T/uneven.xml" --mode=balanced -- "$QEMU" $(vm z) -m 768 ||
  { echo "Bail out! cannot launch VM z"; exit 1; }
kill "$(cat "$T/f.pid")"
wait_for no_record f
check "pinned while moving: VM z claims nodes 0 and 1 before" '["0","1"]' "$(record z | jq -c '.["memory-mib"] | keys')"
whole=$(record z | jq '[.["memory-mib"][]] | add')
z=$(cat "$T/z.pid")
QEMU_PIN_TOPOLOGY="$T/uneven.xml" "$QP_BINARY" move --state-dir="$SD" z --to-nodes=0 >"$T/mz.out" 2>"$T/mz.err" &
mover=$!
claimed() { [ "$(in_log z 'move: claimed the destination beside the source')" -ge 1 ]; }
wait_for claimed || not_ok "pinned while moving: the move did not start: $(cat "$T/z.log")"
ztid=$(grep -l "^CPU 0/" /proc/"$z"/task/*/comm | head -n 1 | cut -d/ -f5)
[ "$(grep Cpus_allowed_list /proc/"$ztid"/status | awk '{print $2}')" = 0 ] && cpu=1 || cpu=0
taskset -pc "$cpu" "$ztid" >/dev/null || not_ok "taskset z"
wait "$mover"
check "pinned while moving: exit status" 1 $?
grep -q "^qemu-pin: move stopped: the caller pinned vCPU 0 itself while the pages moved to nodes 0 .*; the record claims [0-9]* MiB on node 0, where the guest memory is$" "$T/mz.err" &&
  ok "pinned while moving: said, with what the record claims" || not_ok "pinned while moving: $(cat "$T/mz.err")"
settled "pinned while moving" z "$z"
# Node 0 is claimed as the move claimed it: the whole VM, as the plan on
# node 0 alone claims it.
check "pinned while moving: node 0 claims the whole VM" "$whole" "$(record z | jq '.["memory-mib"]["0"]')"
check "pinned while moving: no moved-at" 0 "$(record z | jq '.["moved-at"] // 0')"
check "pinned while moving: vCPU 0 stays on the caller's CPU" "$cpu" "$(grep Cpus_allowed_list /proc/"$ztid"/status | awk '{print $2}')"
check "pinned while moving: the record's shared vCPU is counted where the caller put it" "{\"$cpu\":1}" "$(record z | jq -c '.load')"

echo "1..$n"
exit $failed
