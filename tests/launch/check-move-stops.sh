#!/bin/sh
# `qemu-pin move` when a request is not made, with real QEMU (paused
# guests, -S) on this one-node host: a request whose client was killed while
# it waited behind another move is dropped by the keeper, which says so in
# its -v log and changes nothing (it used to make that move later).
set -u
. "$QP_SOURCE_ROOT/tests/common/hermetic.sh"
QEMU=$(command -v qemu-system-x86_64) || { echo "1..0 # SKIP no qemu-system-x86_64"; exit 77; }
T=$(mktemp -d)
SD=$T/state
n=0
failed=0
cleanup() {
  for p in $(cat "$T"/*.pid 2>/dev/null); do kill "$p" 2>/dev/null; done
  qp_wait_gone "$T"
  rm -rf "$T"
}
trap cleanup EXIT

ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=1; echo "not ok $n - $1"; }
check() { # NAME WANT GOT
  if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1: expected '$2', got '$3'"; fi
}

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

echo "1..$n"
exit $failed
