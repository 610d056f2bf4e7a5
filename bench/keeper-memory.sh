#!/bin/bash
# keeper-memory: what one keeper (one per VM) costs in memory while it holds
# a claim.
#
# Starts a guest that halts forever through qemu-pin (-smp 1, each MODE),
# waits until the keeper has sent cont, finds the keeper's PID in the VM's
# ledger record (keeper-pid), reads /proc/PID/smaps_rollup and
# /proc/PID/status, then stops the guest with SIGTERM. Also reports libvirtd's
# RSS when a libvirtd is running (for scale: one libvirtd per host, one
# keeper per VM).
#
# Usage: bench/keeper-memory.sh [--modes "balanced one-to-one"] [BUILDDIR]
set -u
. "$(dirname "$0")/lib.sh"

modes="balanced one-to-one" builddir=build
while [ $# -gt 0 ]; do
  case $1 in
    --modes) modes=$2; shift 2 ;;
    --modes=*) modes=${1#*=}; shift ;;
    -h|--help) sed -n '2,13s/^# \{0,1\}//p' "$0"; exit 0 ;;
    -*) die "unknown option '$1' (expected --modes)" ;;
    *) builddir=$1; shift ;;
  esac
done
qp=$(find_qemu_pin "$builddir")

bench_tmpdir
fw=$BENCH_TMP/halt.bin
make_halt_firmware "$fw"
export QEMU_PIN_STATE_DIR=$BENCH_STATE
unset QEMU_PIN_MODE QEMU_PIN_VERBOSE
export QEMU_PIN_CONFIG=$BENCH_TMP/none.conf
: > "$QEMU_PIN_CONFIG"

# kib FILE FIELD: the kB value of FIELD: in FILE.
kib() { awk -v f="$2:" '$1 == f { print $2; exit }' "$1"; }

echo "| process | RSS KiB | PSS KiB | Private_Clean KiB | Private_Dirty KiB | private (USS) KiB | RssAnon KiB |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for mode in $modes; do
  err=$BENCH_TMP/err.$mode
  "$qp" -v --mode="$mode" -- "$QEMU" $QEMU_BASE -smp 1 -bios "$fw" >/dev/null 2>"$err" &
  qemu=$!
  for ((w = 0; w < 600; w++)); do
    grep -q 'keeper: .*: cont$' "$err" && break
    kill -0 "$qemu" 2>/dev/null || break
    sleep 0.05
  done
  keeper=$(sed -n 's/.*"keeper-pid" *: *\([0-9]*\).*/\1/p' "$QEMU_PIN_STATE_DIR"/*.json 2>/dev/null | head -n1)
  if [ -z "$keeper" ] || [ "$(cat /proc/"$keeper"/comm 2>/dev/null)" != qemu-pin-keeper ]; then
    echo "| keeper ($mode) | no keeper found: $(grep -m1 '^qemu-pin: [^k]' "$err" | sed 's/|/\\|/g') | | | | | |"
  else
    sleep 0.5   # let it settle in its wait for QEMU's exit
    cp /proc/"$keeper"/smaps_rollup "$BENCH_TMP/rollup"
    cp /proc/"$keeper"/status "$BENCH_TMP/status"
    rss=$(kib "$BENCH_TMP/rollup" Rss) pss=$(kib "$BENCH_TMP/rollup" Pss)
    pc=$(kib "$BENCH_TMP/rollup" Private_Clean) pd=$(kib "$BENCH_TMP/rollup" Private_Dirty)
    anon=$(kib "$BENCH_TMP/status" RssAnon)
    echo "| qemu-pin-keeper (--mode=$mode, -smp 1) | $rss | $pss | $pc | $pd | $((pc + pd)) | $anon |"
  fi
  kill -TERM "$qemu" 2>/dev/null
  wait "$qemu" 2>/dev/null
done

lv=$(ps -C libvirtd -o pid= | head -n1 | tr -d ' ')
if [ -n "$lv" ] && [ -r /proc/"$lv"/smaps_rollup ]; then
  cp /proc/"$lv"/smaps_rollup "$BENCH_TMP/rollup"
  cp /proc/"$lv"/status "$BENCH_TMP/status"
  pc=$(kib "$BENCH_TMP/rollup" Private_Clean) pd=$(kib "$BENCH_TMP/rollup" Private_Dirty)
  echo "| libvirtd (one per host, idle) | $(kib "$BENCH_TMP/rollup" Rss) | $(kib "$BENCH_TMP/rollup" Pss) | $pc | $pd | $((pc + pd)) | $(kib "$BENCH_TMP/status" RssAnon) |"
else
  echo "| libvirtd | not running here | | | | | |"
fi
