#!/bin/sh
# qemu-pin's two modules (docs/design.md, "The front"): the launch module
# links no json-glib, GObject or GIO and exports its entry alone; the full
# module exports its two. A launch whose keeper cannot load the full
# module stops QEMU, releases the claim and says why in one line (TAP).
set -u
. "$QP_SOURCE_ROOT/tests/common/hermetic.sh"
build=$(dirname "$QP_BINARY")
n=0
bad=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); bad=1; echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }

needed=$(readelf -d "$build/qemu-pin-launch.so" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p')
leak=$(echo "$needed" | grep -E 'libjson-glib|libgio|libgobject' || true)
if [ -z "$leak" ] && echo "$needed" | grep -q libglib-2.0; then
  ok "launch module needs glib but no json-glib, gio, gobject"
else
  not_ok "launch module needs $(echo $needed)" "expected glib and none of json-glib, gio, gobject"
fi
full_needed=$(readelf -d "$build/qemu-pin-full.so" | grep -c 'NEEDED.*libjson-glib')
[ "$full_needed" = 1 ] && ok "full module needs json-glib" ||
  not_ok "full module does not need json-glib" "expected libjson-glib NEEDED"

exports() { nm -D --defined-only "$1" | awk '{print $3}' | sort | paste -sd' '; }
e=$(exports "$build/qemu-pin-launch.so")
[ "$e" = "qp_module_main" ] && ok "launch module exports qp_module_main alone" ||
  not_ok "launch module exports: $e" "expected qp_module_main alone"
e=$(exports "$build/qemu-pin-full.so")
[ "$e" = "qp_keeper_module_main qp_module_main" ] && ok "full module exports its two entries" ||
  not_ok "full module exports: $e" "expected qp_keeper_module_main qp_module_main"

# A launch from a directory without the full module.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$QP_BINARY" "$build/qemu-pin-launch.so" "$work/"
mkdir "$work/state"
# The firmware guest: out 0xf4 (isa-debug-exit), QEMU exits with 1.
python3 -c 'import sys
b = bytearray(b"\xff" * 65536)
b[0xfff0:0xfff5] = bytes([0xB0, 0x00, 0xE6, 0xF4, 0xF4])
sys.stdout.buffer.write(b)' >"$work/fw.bin"
for mode in balanced one-to-one; do
  QEMU_PIN_STATE_DIR=$work/state "$work/qemu-pin" --mode=$mode -- \
    qemu-system-x86_64 -machine q35 -accel tcg -display none -nodefaults \
    -m 64 -smp 2 -bios "$work/fw.bin" -device isa-debug-exit,iobase=0xf4,iosize=4 \
    -name "no-keeper-$mode" >"$work/out" 2>"$work/err"
  rc=$?
  # The keeper kills QEMU, releases the claim, then says why: wait for it.
  for i in $(seq 50); do
    grep -q "QEMU was stopped" "$work/err" && break
    sleep 0.1
  done
  records=$(find "$work/state" -name '*.json' | wc -l)
  left=$(pgrep -f "no-keeper-$mode" || true)
  # (the shell may say "Killed" there itself)
  lines=$(grep -vc '^Killed$' "$work/err")
  if [ "$rc" = 137 ] && [ "$records" = 0 ] && [ -z "$left" ] && [ "$lines" = 1 ] &&
    grep -q "QEMU was stopped: the keeper cannot load $work/qemu-pin-full.so" "$work/err"; then
    ok "$mode: no full module: QEMU killed, claim released, one line"
  else
    not_ok "$mode: no full module: rc $rc, $records records, left: $left" "$(cat "$work/err")"
  fi
done
# qemu-pin's own commands are the full module's: said in one line.
"$work/qemu-pin" status >"$work/out" 2>"$work/err"
rc=$?
[ "$rc" = 1 ] && [ "$(grep -c . "$work/err")" = 1 ] && grep -q "cannot load the rest of qemu-pin" "$work/err" &&
  ok "status without the full module: one line, exit 1" ||
  not_ok "status without the full module: rc $rc" "$(cat "$work/err")"
"$work/qemu-pin" --dry-run -- qemu-system-x86_64 -m 64 >"$work/out" 2>"$work/err"
rc=$?
[ "$rc" = 1 ] && [ "$(grep -c . "$work/err")" = 1 ] && grep -q "cannot load the rest of qemu-pin ($work/qemu-pin-full.so)" "$work/err" &&
  ok "--dry-run hands over to the full module, which is missing: one line" ||
  not_ok "--dry-run without the full module: rc $rc" "$(cat "$work/err")"
echo "1..$n"
exit $bad
