#!/bin/bash
# keeper-memory: what one keeper (one per VM) costs in memory while it holds
# a claim.
#
# Starts a guest that halts forever through qemu-pin (-smp 1, each MODE),
# waits until the keeper has made its first look (and sent cont when it
# paused QEMU), finds the keeper's PID in the VM's
# ledger record (keeper-pid), reads /proc/PID/smaps_rollup and
# /proc/PID/status; then does the same for a second guest beside it (the
# cost of each further VM), and stops both with SIGTERM. Also reports libvirtd's
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

# start_vm MODE NAME: starts a halting guest through qemu-pin; sets $vm_pid
# (QEMU) and $vm_keeper (its keeper, from the VM's ledger record), or
# $vm_error.
start_vm() {
  local err=$BENCH_TMP/err.$2
  "$qp" -v --mode="$1" -- "$QEMU" $QEMU_BASE -smp 1 -name "$2" -bios "$fw" >/dev/null 2>"$err" &
  vm_pid=$! vm_keeper= vm_error=
  for ((w = 0; w < 600; w++)); do
    grep -q 'keeper: .*: waited .* for QEMU' "$err" && break
    kill -0 "$vm_pid" 2>/dev/null || break
    sleep 0.05
  done
  vm_keeper=$(grep -l "\"$2\"" "$QEMU_PIN_STATE_DIR"/*.json 2>/dev/null | head -n1 |
    xargs -r sed -n 's/.*"keeper-pid" *: *\([0-9]*\).*/\1/p' | head -n1)
  if [ -z "$vm_keeper" ] || [ "$(cat /proc/"$vm_keeper"/comm 2>/dev/null)" != qemu-pin-keeper ]; then
    vm_keeper=
    vm_error="no keeper found: $(grep -m1 '^qemu-pin: [^k]' "$err" | sed 's/|/\\|/g')"
  fi
}

# row LABEL PID: one table row from the process's smaps_rollup and status.
row() {
  sleep 0.5   # let it settle in its wait for QEMU's exit
  cp /proc/"$2"/smaps_rollup "$BENCH_TMP/rollup"
  cp /proc/"$2"/status "$BENCH_TMP/status"
  local rss pss pc pd anon
  rss=$(kib "$BENCH_TMP/rollup" Rss) pss=$(kib "$BENCH_TMP/rollup" Pss)
  pc=$(kib "$BENCH_TMP/rollup" Private_Clean) pd=$(kib "$BENCH_TMP/rollup" Private_Dirty)
  anon=$(kib "$BENCH_TMP/status" RssAnon)
  echo "| $1 | $rss | $pss | $pc | $pd | $((pc + pd)) | $anon |"
}

echo "| process | RSS KiB | PSS KiB | Private_Clean KiB | Private_Dirty KiB | private (USS) KiB | RssAnon KiB |"
echo "|---|---:|---:|---:|---:|---:|---:|"
# A keeper alone maps pages of libhwloc and glib that no
# other process maps: they count as its private (clean) memory. A second
# keeper shares them, as the keepers of 100 VMs do: its figures are the cost
# of each further VM.
for mode in $modes; do
  start_vm "$mode" "first-$mode"
  first_pid=$vm_pid first_keeper=$vm_keeper
  if [ -z "$first_keeper" ]; then
    echo "| keeper ($mode) | $vm_error | | | | | |"
  else
    row "qemu-pin-keeper, the host's only one (--mode=$mode, -smp 1)" "$first_keeper"
    start_vm "$mode" "second-$mode"
    if [ -z "$vm_keeper" ]; then
      echo "| keeper ($mode, second VM) | $vm_error | | | | | |"
    else
      row "qemu-pin-keeper, each further one (--mode=$mode, -smp 1)" "$vm_keeper"
    fi
    kill -TERM "$vm_pid" 2>/dev/null
    wait "$vm_pid" 2>/dev/null
  fi
  kill -TERM "$first_pid" 2>/dev/null
  wait "$first_pid" 2>/dev/null
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
