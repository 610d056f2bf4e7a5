#!/bin/sh
# qemu-pin's two executables (docs/design.md, "The front"): the launcher
# (qemu-pin) is statically linked where the build can (QP_LAUNCHER_STATIC=1:
# no interpreter, no library to load) and else needs glib and hwloc but no
# json-glib, GObject, GIO or libnuma; it holds no json-glib code either way,
# and it holds the keeper. The full program needs json-glib. A launch needs
# the launcher alone, its keeper included: without the full program a
# paused plan is resumed and the claim released; qemu-pin's commands say in
# one line that it is missing (TAP).
set -u
. "$QP_SOURCE_ROOT/tests/common/hermetic.sh"
build=$(dirname "$QP_BINARY")
n=0
bad=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); bad=1; echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }

dyn=$(readelf -d "$QP_BINARY" 2>&1)
needed=$(echo "$dyn" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p')
if [ "${QP_LAUNCHER_STATIC:-0}" = 1 ]; then
  interp=$(readelf -l "$QP_BINARY" | grep -c INTERP)
  [ -z "$needed" ] && [ "$interp" = 0 ] &&
    ok "launcher is statically linked (no interpreter, no library needed): it loads nothing" ||
    not_ok "launcher has an interpreter ($interp) or needs $(echo $needed)" "$dyn"
else
  leak=$(echo "$needed" | grep -E 'libjson-glib|libgio|libgobject|libnuma' || true)
  if [ -z "$leak" ] && echo "$needed" | grep -q libglib-2.0; then
    ok "launcher needs glib but no json-glib, gio, gobject, libnuma"
  else
    not_ok "launcher needs $(echo $needed)" "expected glib and none of json-glib, gio, gobject, libnuma (launcher/numa-sys.h)"
  fi
fi
json=$(nm "$QP_BINARY" 2>&1 | grep -c ' json_' || true)
[ "$json" = 0 ] && ok "launcher holds no json-glib code" ||
  not_ok "launcher refers to $json json-glib symbols" "$(nm "$QP_BINARY" | grep ' json_' | head)"
full_needed=$(readelf -d "$build/qemu-pin-full" | grep -c 'NEEDED.*libjson-glib')
[ "$full_needed" = 1 ] && ok "full program needs json-glib" ||
  not_ok "full program does not need json-glib" "expected libjson-glib NEEDED"
# The keeper is the launcher's own: QMP is in it.
nm "$QP_BINARY" | grep -q ' qp_keeper_main$' &&
  nm "$QP_BINARY" | grep -q ' qp_qmp_handshake_ahead$' &&
  ok "launcher holds the keeper and its QMP client" ||
  not_ok "launcher lacks qp_keeper_main or qp_qmp_handshake_ahead"

# A launch from a directory without the full program.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$QP_BINARY" "$work/qemu-pin"
mkdir "$work/state"
# The firmware guest: out 0xf4 (isa-debug-exit), QEMU exits with 1.
python3 -c 'import sys
b = bytearray(b"\xff" * 65536)
b[0xfff0:0xfff5] = bytes([0xB0, 0x00, 0xE6, 0xF4, 0xF4])
sys.stdout.buffer.write(b)' >"$work/fw.bin"
# one-to-one pauses QEMU (-S): only the keeper's cont lets the guest run to
# its exit (status 1); balanced does not pause. Either way the keeper sees
# QEMU go and removes the record.
for mode in balanced one-to-one; do
  QEMU_PIN_STATE_DIR=$work/state "$work/qemu-pin" -v --mode=$mode -- \
    qemu-system-x86_64 -machine q35 -accel tcg -display none -nodefaults \
    -m 64 -smp 2 -bios "$work/fw.bin" -device isa-debug-exit,iobase=0xf4,iosize=4 \
    -name "keeper-$mode" >"$work/out" 2>"$work/err" &
  pid=$!
  for i in $(seq 100); do
    kill -0 $pid 2>/dev/null || break
    sleep 0.1
  done
  kill -9 $pid 2>/dev/null
  wait $pid
  rc=$?
  # The keeper releases the claim once QEMU is gone: wait for it.
  for i in $(seq 50); do
    [ "$(find "$work/state" -name '*.json' | wc -l)" = 0 ] && break
    sleep 0.1
  done
  records=$(find "$work/state" -name '*.json' | wc -l)
  left=$(pgrep -f "keeper-$mode" || true)
  # Paused (the plan says so: /plan tests): the keeper pinned the vCPUs
  # before its cont. Its "cont" line
  # comes only with cont's reply, which a guest that exits at once may
  # never send; the guest's own exit (rc 1 within the bound, where a QEMU
  # left paused is killed: 137) is what shows it was resumed.
  paused=no
  grep -q "keeper: .*: pinned [1-9][0-9]* threads" "$work/err" && paused=yes
  want_paused=no
  [ $mode = one-to-one ] && want_paused=yes
  if [ "$rc" = 1 ] && [ "$records" = 0 ] && [ -z "$left" ] && [ $paused = $want_paused ] &&
    ! grep -q "error\|cannot" "$work/err"; then
    ok "$mode: no full program: QEMU ran to its exit (cont sent: $paused), claim released"
  else
    not_ok "$mode: no full program: rc $rc, $records records, cont sent: $paused, left: $left" "$(cat "$work/err")"
  fi
done
# qemu-pin's own commands are the full program's: said in one line.
"$work/qemu-pin" status >"$work/out" 2>"$work/err"
rc=$?
[ "$rc" = 1 ] && [ "$(grep -c . "$work/err")" = 1 ] &&
  grep -q "cannot run the rest of qemu-pin (.*qemu-pin-full): No such file or directory" "$work/err" &&
  ok "status without the full program: one line, exit 1" ||
  not_ok "status without the full program: rc $rc" "$(cat "$work/err")"
"$work/qemu-pin" --dry-run -- qemu-system-x86_64 -m 64 >"$work/out" 2>"$work/err"
rc=$?
[ "$rc" = 1 ] && [ "$(grep -c . "$work/err")" = 1 ] &&
  grep -q "cannot run the rest of qemu-pin (.*qemu-pin-full): No such file or directory" "$work/err" &&
  ok "--dry-run hands over to the full program, which is missing: one line" ||
  not_ok "--dry-run without the full program: rc $rc" "$(cat "$work/err")"
# Help, asked of any command among its own options, is the usage on
# stdout and exit 0 (as `qemu-pin --help`), nothing else done; after "--"
# or a QEMU binary, -h is QEMU's.
"$QP_BINARY" --help >"$work/help" 2>"$work/err"
grep -q "^Usage:" "$work/help" && [ ! -s "$work/err" ] &&
  ok "--help: the usage on stdout" || not_ok "--help" "$(cat "$work/help" "$work/err")"
for args in "plan --help" "plan --json -h" "status --help" "status --json -h" \
  "topology --help" "move --help" "move VM --to-nodes=0 -h" "rebalance --dry-run --help"; do
  # shellcheck disable=SC2086
  "$QP_BINARY" $args --state-dir="$work/help-state" >"$work/out" 2>"$work/err"
  rc=$?
  [ "$rc" = 0 ] && cmp -s "$work/out" "$work/help" && [ ! -s "$work/err" ] && [ ! -e "$work/help-state" ] &&
    ok "qemu-pin $args: the usage, exit 0, no state made" ||
    not_ok "qemu-pin $args: rc $rc" "$(head -3 "$work/out")" "$(cat "$work/err")"
done
"$QP_BINARY" plan --state-dir="$work/help-state" --json -- qemu-system-x86_64 -m 64 -h >"$work/out" 2>"$work/err"
rc=$?
[ "$rc" = 0 ] && ! cmp -s "$work/out" "$work/help" && jq -e .mode "$work/out" >/dev/null &&
  ok "plan -- QEMU -h: -h is QEMU's, the plan is printed" ||
  not_ok "plan -- QEMU -h: rc $rc" "$(head -3 "$work/out")" "$(cat "$work/err")"
# No QEMU binary at all: bad usage, one line with the usage of what was run.
for cmd in "" plan; do
  # shellcheck disable=SC2086
  "$QP_BINARY" $cmd --state-dir="$work/help-state" >"$work/out" 2>"$work/err"
  rc=$?
  want="no QEMU binary given: usage: qemu-pin ${cmd:+$cmd }\[OPTIONS\] \[--\] QEMU_BINARY"
  [ "$rc" = 2 ] && [ "$(grep -c . "$work/err")" = 1 ] && grep -q "$want" "$work/err" && [ ! -s "$work/out" ] &&
    ok "qemu-pin ${cmd:-(no command)} without QEMU: one line, its usage, exit 2" ||
    not_ok "qemu-pin $cmd without QEMU: rc $rc" "$(cat "$work/err")"
done
# A word qemu-pin takes for QEMU's binary and cannot find: one line, 127
# (the shell's "not found"); a word that names no QEMU may have been meant
# for qemu-pin, and the line says its commands too.
for word in stauts qemu-system-nosuch; do
  "$QP_BINARY" --state-dir="$work/help-state" "$word" -m 64 >"$work/out" 2>"$work/err"
  rc=$?
  hint=$(grep -c "nor is it a command of qemu-pin's (plan, topology, status, move, rebalance" "$work/err")
  want_hint=1
  [ "$word" = qemu-system-nosuch ] && want_hint=0
  [ "$rc" = 127 ] && [ "$(grep -c . "$work/err")" = 1 ] && [ "$hint" = "$want_hint" ] &&
    grep -q "cannot run QEMU binary '$word': No such file or directory" "$work/err" &&
    [ -z "$(ls "$work/help-state"/*.json 2>/dev/null)" ] &&
    ok "qemu-pin $word: one line, exit 127, the commands named: $want_hint, no claim left" ||
    not_ok "qemu-pin $word: rc $rc" "$(cat "$work/err")"
done
echo "1..$n"
exit $bad
