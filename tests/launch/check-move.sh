#!/bin/sh
# `qemu-pin move` on this host, with real QEMU (paused guests, -S, that stay
# up): what it refuses, each in one line with nothing changed (an unknown
# VM, nodes the host does not have, a VM whose vCPU the caller pinned, a
# destination without room), and a move that succeeds (to the node the VM
# is on: the only one here), which prints on stdout only and stamps the
# record's "moved-at". Moves between nodes: tests/lab/lab-move.sh.
set -u
. "$QP_SOURCE_ROOT/tests/common/hermetic.sh"
QEMU=$(command -v qemu-system-x86_64) || { echo "1..0 # SKIP no qemu-system-x86_64"; exit 77; }
T=$(mktemp -d)
SD=$T/state
n=0
failed=0
cleanup() {
  for p in $(cat "$T"/*.pid 2>/dev/null); do kill "$p" 2>/dev/null; done
  rm -rf "$T"
}
trap cleanup EXIT

ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=1; echo "not ok $n - $1"; }
check() { # NAME WANT GOT
  if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1: expected '$2', got '$3'"; fi
}

# launch NAME [QEMU-PIN OPTIONS] -- QEMU ARGS: a daemonized VM; its pid
# (called in $(...), a subshell: cleanup kills every VM by its pid file).
launch() {
  name=$1
  shift
  "$QP_BINARY" --state-dir="$SD" "$@" -daemonize -pidfile "$T/$name.pid" \
    >"$T/$name.out" 2>&1 || { cat "$T/$name.out" >&2; return 1; }
  cat "$T/$name.pid"
}
vm() { echo "-name $1,debug-threads=on -machine q35 -accel tcg -display none -nodefaults -S -smp 2"; }
record() { cat "$SD"/*.json | jq -c --argjson p "$1" 'select(.["qemu-pid"] == $p)'; }
# What a move changes of a record: its memory and when it last moved.
placed() { record "$1" | jq -c '[.["memory-mib"], .["moved-at"]]'; }
move() { "$QP_BINARY" move --state-dir="$SD" "$@" >"$T/move.out" 2>"$T/move.err"; }

# One line on stderr, exit status WANT, record of PID unchanged (BEFORE).
refused() { # NAME WANT_RC RC PID BEFORE
  check "$1: exit status" "$2" "$3"
  check "$1: one line on stderr" 1 "$(wc -l <"$T/move.err")"
  check "$1: nothing on stdout" 0 "$(wc -c <"$T/move.out")"
  check "$1: the record's memory and moved-at are unchanged" "$5" "$(placed "$4")"
}

# shellcheck disable=SC2046
a=$(launch a --mode=balanced -- "$QEMU" $(vm a) -m 64) || { echo "Bail out! cannot launch VM a"; exit 1; }
before=$(placed "$a")

move nosuch --to-nodes=0
refused "unknown VM" 2 $? "$a" "$before"
grep -q "no VM 'nosuch' in the ledger" "$T/move.err" && ok "unknown VM: named" || not_ok "unknown VM: $(cat "$T/move.err")"

move a --to-nodes=7
refused "node the host lacks" 2 $? "$a" "$before"
grep -q "to-nodes=7 names nodes this host does not have" "$T/move.err" && ok "node the host lacks: named" || not_ok "node: $(cat "$T/move.err")"

move a --to-nodes=x
refused "a nodelist that is none" 2 $? "$a" "$before"

# A move that fits: to where the VM is, by pid.
move "$a" --to-nodes=0
check "move: exit status" 0 $?
check "move: nothing on stderr" "" "$(cat "$T/move.err")"
grep -q "^qemu-pin: moved VM a " "$T/move.out" && ok "move: said on stdout" || not_ok "move: stdout '$(cat "$T/move.out")'"
check "move: the record claims node 0" '{"0":64}' "$(record "$a" | jq -c '.["memory-mib"]')"
moved=$(record "$a" | jq '.["moved-at"] // 0')
[ "$moved" -gt 0 ] && ok "move: moved-at stamped" || not_ok "move: moved-at is $moved"
before=$(placed "$a")

# The caller pins vCPU 0 itself (as virsh vcpupin does): never moved.
tid=$(grep -l "^CPU 0/" /proc/"$a"/task/*/comm | head -n 1 | cut -d/ -f5)
taskset -pc 0 "$tid" >/dev/null || not_ok "taskset"
move a --to-nodes=0
refused "caller-pinned" 1 $? "$a" "$before"
grep -q "the caller pinned vCPU 0 itself" "$T/move.err" && ok "caller-pinned: named" || not_ok "caller-pinned: $(cat "$T/move.err")"
check "caller-pinned: vCPU 0 stays where the caller put it" 0 "$(grep Cpus_allowed_list /proc/"$tid"/status | awk '{print $2}')"

# No room: VM b was started with a host reserve that leaves 576 MiB beside
# it; VM c then claims 1536 MiB (not resident: -S, no prealloc). Moving b
# needs its 64 MiB again on node 0 with c's claim counted: refused.
# The reserve works on the node's total less its claims (what the kernel
# can give now only makes the room smaller), so it is sized from that rule.
room=$("$QP_BINARY" status --json --state-dir="$SD" | jq '.nodes[0]["memory-mib"] | .total - .["hugepage-pools"] - .claimed')
reserve=$((room - 64 - 576))
# shellcheck disable=SC2046
b=$(launch b --mode=balanced --reserve-mib="$reserve" -- "$QEMU" $(vm b) -m 64) || not_ok "launch b"
# shellcheck disable=SC2046
c=$(launch c --mode=balanced -- "$QEMU" $(vm c) -m 1536) || not_ok "launch c"
before=$(placed "$b")
move b --to-nodes=0
refused "no room" 1 $? "$b" "$before"
grep -q "move refused" "$T/move.err" && ok "no room: named" || not_ok "no room: $(cat "$T/move.err")"
check "no room: c's claim is unchanged" '{"0":1536}' "$(record "$c" | jq -c '.["memory-mib"]')"
echo "1..$n"
exit $failed
