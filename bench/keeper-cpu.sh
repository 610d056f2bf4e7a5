#!/bin/bash
# keeper-cpu: what one keeper costs in CPU while it holds a claim and
# nothing happens, and what one look at a thread the caller moved costs.
#
# Starts a guest that halts forever through qemu-pin (-smp 2, each MODE),
# waits until the keeper has made its first look (and sent cont when it
# paused QEMU), then reads the keeper's CPU time
# (se.sum_exec_runtime of /proc/PID/sched, in ms; utime+stime ticks when
# the kernel has no sched debug) and its wakeups (voluntary context
# switches) over HOLD seconds. Then moves vCPU 0 to one CPU (taskset -p, as
# `virsh vcpupin` does) and reads the same over the keeper's next look.
#
# Usage: bench/keeper-cpu.sh [--modes "balanced one-to-one"] [--hold S] [BUILDDIR]
set -u
. "$(dirname "$0")/lib.sh"

modes="balanced one-to-one" hold=60 builddir=build
while [ $# -gt 0 ]; do
  case $1 in
    --modes) modes=$2; shift 2 ;;
    --modes=*) modes=${1#*=}; shift ;;
    --hold) hold=$2; shift 2 ;;
    --hold=*) hold=${1#*=}; shift ;;
    -h|--help) sed -n '2,12s/^# \{0,1\}//p' "$0"; exit 0 ;;
    -*) die "unknown option '$1' (expected --modes or --hold)" ;;
    *) builddir=$1; shift ;;
  esac
done
qp=$(find_qemu_pin "$builddir")
command -v taskset >/dev/null || die "needs taskset (util-linux)"

bench_tmpdir
fw=$BENCH_TMP/halt.bin
make_halt_firmware "$fw"
export QEMU_PIN_STATE_DIR=$BENCH_STATE
unset QEMU_PIN_MODE QEMU_PIN_VERBOSE
export QEMU_PIN_CONFIG=$BENCH_TMP/none.conf
: > "$QEMU_PIN_CONFIG"

# cpu_ms PID: CPU time of PID so far, in ms.
cpu_ms() {
  local v
  v=$(awk '$1 == "se.sum_exec_runtime" { print $3; exit }' /proc/"$1"/sched 2>/dev/null)
  if [ -n "$v" ]; then echo "$v"; return; fi
  awk -v hz="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); print ($12 + $13) * 1000 / hz }' /proc/"$1"/stat
}
# wakeups PID: voluntary context switches of PID so far.
wakeups() { awk '$1 == "voluntary_ctxt_switches:" { print $2 }' /proc/"$1"/status; }

echo "| keeper (-smp 2) | held for | CPU ms | wakeups | CPU ms per hour | one look after a vCPU moved: CPU ms |"
echo "|---|---:|---:|---:|---:|---:|"
for mode in $modes; do
  err=$BENCH_TMP/err.$mode
  "$qp" -v --mode="$mode" -- "$QEMU" $QEMU_BASE -smp 2 -name "cpu-$mode,debug-threads=on" \
    -bios "$fw" >/dev/null 2>"$err" &
  vm=$!
  for ((w = 0; w < 600; w++)); do
    grep -q 'keeper: .*: waited .* for QEMU' "$err" && break
    kill -0 "$vm" 2>/dev/null || break
    sleep 0.05
  done
  keeper=$(grep -l "\"cpu-$mode\"" "$QEMU_PIN_STATE_DIR"/*.json 2>/dev/null | head -n1 |
    xargs -r sed -n 's/.*"keeper-pid" *: *\([0-9]*\).*/\1/p' | head -n1)
  if [ -z "$keeper" ]; then
    echo "| $mode | no keeper: $(grep -m1 '^qemu-pin: [^k]' "$err") | | | | |"
    kill -TERM "$vm" 2>/dev/null; wait "$vm" 2>/dev/null
    continue
  fi
  sleep 1
  c0=$(cpu_ms "$keeper") w0=$(wakeups "$keeper")
  sleep "$hold"
  c1=$(cpu_ms "$keeper") w1=$(wakeups "$keeper")
  # One look that finds a moved thread: the QMP queries and the ledger write.
  # vCPU 0 goes to the last CPU of vCPU 1, which is never vCPU 0's set.
  tid0=$(grep -l '^CPU 0/' /proc/"$vm"/task/*/comm | head -n1 | cut -d/ -f5)
  tid1=$(grep -l '^CPU 1/' /proc/"$vm"/task/*/comm | head -n1 | cut -d/ -f5)
  cpu=$(taskset -pc "$tid1" | sed 's/.*: //; s/.*[,-]//')
  taskset -pc "$cpu" "$tid0" >/dev/null
  c2=$(cpu_ms "$keeper")
  for ((w = 0; w < 200; w++)); do
    grep -q 'kept (the caller' "$err" && break
    sleep 0.05
  done
  c3=$(cpu_ms "$keeper")
  awk -v m="$mode" -v h="$hold" -v a="$c0" -v b="$c1" -v wa="$w0" -v wb="$w1" \
    -v c="$c2" -v d="$c3" 'BEGIN {
      printf "| %s | %d s | %.3f | %d | %.1f | %.3f |\n", m, h, b - a, wb - wa,
        (b - a) * 3600 / h, d - c }'
  kill -TERM "$vm" 2>/dev/null
  wait "$vm" 2>/dev/null
done
