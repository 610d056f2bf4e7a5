#!/bin/bash
# pin-latency: how long the keeper holds a paused guest, by vCPU count, and
# how long its first look takes where the plan does not pause (the guest
# runs meanwhile: the "cont" column is "-", the keeper's own time ends at
# the look).
#
# The keeper logs its steps at -v with its own monotonic clock:
#   qemu-pin: keeper: +X.XXX ms: QMP greeting and capabilities
#   qemu-pin: keeper: +X.XXX ms: QEMU is pid ... with N vCPUs
#   qemu-pin: keeper: +X.XXX ms: pinned N threads ...
#   qemu-pin: keeper: +X.XXX ms: cont
#   qemu-pin: keeper: +X.XXX ms: waited W ms for QEMU's replies ...
# The keeper's own time is greeting -> cont (unpaused: -> pinned) less W,
# the time it spent blocked on QEMU (which, paused or not, answers at its
# own pace).
# For each vCPU count (1 up to 255, the most QEMU 7.2 accepts for q35 under
# TCG: 256 and more need a kernel irqchip with x2APIC) and mode, a guest
# that halts forever is launched RUNS times (and stopped with SIGTERM once the
# keeper has sent cont, or made its first look) and the medians of greeting -> pinned and greeting ->
# cont are reported. (A guest that exits at once can race QEMU's reply to
# cont, which then never comes.) A count qemu-pin refuses on this
# host (more vCPUs than usable CPUs) is reported with qemu-pin's reason.
#
# Usage: bench/pin-latency.sh [--runs N] [--vcpus "1 2 4 ..."]
#                             [--modes "one-to-one balanced"] [BUILDDIR]
set -u
. "$(dirname "$0")/lib.sh"

runs=11 vcpus="1 2 4 8 16 32 64 128 255" modes="one-to-one balanced"
builddir=build
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --runs=*) runs=${1#*=}; shift ;;
    --vcpus) vcpus=$2; shift 2 ;;
    --vcpus=*) vcpus=${1#*=}; shift ;;
    --modes) modes=$2; shift 2 ;;
    --modes=*) modes=${1#*=}; shift ;;
    -h|--help) sed -n '2,/^# Usage/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    -*) die "unknown option '$1' (expected --runs, --vcpus, --modes)" ;;
    *) builddir=$1; shift ;;
  esac
done
case $runs in ''|*[!0-9]*|0) die "--runs '$runs' is not a positive number" ;; esac
qp=$(find_qemu_pin "$builddir")

bench_tmpdir
fw=$BENCH_TMP/halt.bin
make_halt_firmware "$fw"
export QEMU_PIN_STATE_DIR=$BENCH_STATE
unset QEMU_PIN_MODE QEMU_PIN_VERBOSE
export QEMU_PIN_CONFIG=$BENCH_TMP/none.conf
: > "$QEMU_PIN_CONFIG"

# stamp FILE EVENT-PREFIX: the keeper's milliseconds for that event.
stamp() {
  sed -n "s/^qemu-pin: keeper: +\([0-9.]*\) ms: $2.*/\1/p" "$1" | head -n1
}

# One launch; prints "pinned_ms cont_ms own_ms", or nothing and the reason in
# $BENCH_TMP/why.
one_run() {
  local mode=$1 n=$2 err=$BENCH_TMP/err
  : > "$err"
  "$qp" -v --mode="$mode" -- "$QEMU" $QEMU_BASE -smp "$n" -bios "$fw" \
    >/dev/null 2>"$err" &
  local pid=$!   # qemu-pin execs QEMU in place: this is QEMU
  for ((w = 0; w < 600; w++)); do
    grep -q "keeper: .*: waited .* for QEMU" "$err" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  kill -TERM "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  local g p c w
  g=$(stamp "$err" "QMP greeting")
  p=$(stamp "$err" "pinned")
  c=$(stamp "$err" "cont")
  w=$(sed -n "s/^qemu-pin: keeper: +[0-9.]* ms: waited \([0-9.]*\) ms for QEMU.*/\1/p" "$err" | head -n1)
  if [ -z "$g" ] || [ -z "$p" ] || [ -z "$w" ]; then
    grep -m1 '^qemu-pin: [^k]' "$err" | sed 's/^qemu-pin: //; s/|/\\|/g' > "$BENCH_TMP/why"
    [ -s "$BENCH_TMP/why" ] || echo "no keeper timings (see qemu-pin -v)" > "$BENCH_TMP/why"
    return 1
  fi
  # Unpaused: no cont, the look is the end.
  awk -v g="$g" -v p="$p" -v c="$c" -v w="$w" 'BEGIN {
    if (c == "") printf "%.3f - %.3f\n", p - g, p - g - w
    else printf "%.3f %.3f %.3f\n", p - g, c - g, c - g - w }'
}

echo "| vCPUs | mode | greeting -> pinned (ms) | greeting -> cont (ms) | the keeper's own (ms) | runs |"
echo "|---:|---|---:|---:|---:|---:|"
# A count refused in a mode is refused for every larger one too: those are
# tried no more and reported in one row.
declare -A refused_at=() refused_why=()
for n in $vcpus; do
  for mode in $modes; do
    if [ -n "${refused_at[$mode]:-}" ]; then
      refused_at[$mode]="${refused_at[$mode]}, $n"
      continue
    fi
    : > "$BENCH_TMP/p"; : > "$BENCH_TMP/c"; : > "$BENCH_TMP/o"
    reason=
    for ((r = 0; r < runs; r++)); do
      if ! out=$(one_run "$mode" "$n"); then
        reason=$(cat "$BENCH_TMP/why")
        break
      fi
      read -r op oc oo <<< "$out"
      echo "$op" >> "$BENCH_TMP/p"
      [ "$oc" = - ] || echo "$oc" >> "$BENCH_TMP/c"
      echo "$oo" >> "$BENCH_TMP/o"
    done
    if [ -n "$reason" ]; then
      refused_at[$mode]=$n
      refused_why[$mode]=$reason
    else
      c=-; [ -s "$BENCH_TMP/c" ] && c=$(median < "$BENCH_TMP/c")
      echo "| $n | $mode | $(median < "$BENCH_TMP/p") | $c | $(median < "$BENCH_TMP/o") | $runs |"
    fi
  done
done
for mode in $modes; do
  [ -z "${refused_at[$mode]:-}" ] ||
    echo "| ${refused_at[$mode]} | $mode | refused (at ${refused_at[$mode]%%,*}): ${refused_why[$mode]} | | | 0 |"
done
