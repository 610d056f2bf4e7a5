#!/bin/bash
# launch-bench: what qemu-pin adds to a VM's start.
#
# The guest is a 64 KiB firmware that exits at once through isa-debug-exit
# (QEMU exits 1), so a run is QEMU's whole life: start, (plan, claim, pin,)
# run, exit. Each -smp is started directly by QEMU and through qemu-pin in
# modes none, balanced, auto, numa and one-to-one, interleaved (each round
# runs every variant once, in an order shuffled anew each round, so that a
# busy host slows every variant alike and no variant always follows the
# same other one); the table gives the median
# wall time of each, its ratio to QEMU alone and the milliseconds added (the
# difference of the medians, and the median of the per-round differences),
# and the median of the per-round ratios to QEMU alone and to the pause
# floor (below), which a host whose load drifts disturbs less.
# Two more variants: QEMU started paused (-S) and resumed over QMP by the
# quickest client there is (commands queued on stdin), the flow of a plan
# that pauses to pin (and libvirt's): the pause floor; and `qemu-pin plan`
# (load the host, read the ledger, plan, print; no QEMU), how much of the
# added time is spent before QEMU starts. The last column says whether
# qemu-pin started QEMU paused (its plan's "pause").
# Three more give floors of their own: QEMU exec'd by a program that does
# nothing else (bench/exec-only.c, linked as the launcher is), the least
# any wrapper costs and mode none's floor; and QEMU with a QMP monitor of an
# orchestrator's (a listening socket, as libvirt and Proxmox always give
# it), alone and launched by qemu-pin in mode balanced. A second table
# gives the paired ratio of each to its own floor.
# Two more run QEMU with what a balanced launch adds and nothing of
# qemu-pin (bench/qemu-args-only.c): all of it (the memory backend bound to
# the node, the process's MPOL_BIND, the private monitor), QEMU's share of
# a launch; and the bound backend alone, whose mbind(2) QEMU makes with
# MPOL_MF_MOVE (set against the exec floor in the second table).
# A variant qemu-pin refuses on this host (more vCPUs than usable CPUs) is
# reported as refused with qemu-pin's reason.
# The last column is the 95% confidence interval of the paired ratio to QEMU
# alone (order statistics of the rounds' ratios, lib.sh median_interval):
# how far the median itself may be off, since a start's wall time spreads
# widely on a small shared host. --runs-at "SMP:N ..." runs N rounds at
# those -smp instead of --runs, where a figure needs a narrower interval.
#
# Usage: bench/launch-bench.sh [--runs N] [--runs-at "SMP:N ..."] [--smp "1 8 64"] [BUILDDIR]
# Prints a Markdown table. QP_BINARY overrides BUILDDIR/qemu-pin.
set -u
. "$(dirname "$0")/lib.sh"

runs=21 runs_at= smps="1 8 64" builddir=build
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --runs=*) runs=${1#*=}; shift ;;
    --runs-at) runs_at=$2; shift 2 ;;
    --runs-at=*) runs_at=${1#*=}; shift ;;
    --smp) smps=$2; shift 2 ;;
    --smp=*) smps=${1#*=}; shift ;;
    -h|--help) sed -n '2,/^# Prints/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    -*) die "unknown option '$1' (expected --runs N, --runs-at \"SMP:N ...\", --smp LIST)" ;;
    *) builddir=$1; shift ;;
  esac
done
case $runs in ''|*[!0-9]*|0) die "--runs '$runs' is not a positive number" ;; esac
for at in $runs_at; do
  case $at in
    [0-9]*:[0-9]*) case ${at%%:*}${at#*:} in *[!0-9]*) die "--runs-at: '$at' is not SMP:N (two numbers)" ;; esac
      [ "${at#*:}" -gt 0 ] || die "--runs-at: '$at' asks for no rounds" ;;
    *) die "--runs-at: '$at' is not SMP:N (two numbers)" ;;
  esac
done
# rounds_at SMP: the rounds to run at that -smp.
rounds_at() {
  local at n=$runs
  for at in $runs_at; do [ "${at%%:*}" = "$1" ] && n=${at#*:}; done
  echo "$n"
}
qp=$(find_qemu_pin "$builddir")
command -v "$QEMU" >/dev/null || die "$QEMU is not installed (Debian: qemu-system-x86)"

bench_tmpdir
fw=$BENCH_TMP/exit.bin
make_exit_firmware "$fw"
export QEMU_PIN_STATE_DIR=$BENCH_STATE
unset QEMU_PIN_MODE QEMU_PIN_VERBOSE QEMU_PIN_CONFIG
export QEMU_PIN_CONFIG=$BENCH_TMP/none.conf   # no host config: defaults only
: > "$QEMU_PIN_CONFIG"

variants="direct exec qmp args bind none balanced auto numa one-to-one plan mon mon-balanced"
args_only=$(dirname "$qp")/bench/qemu-args-only
[ -x "$args_only" ] || variants=${variants/ args bind/}
exec_only=$(dirname "$qp")/bench/exec-only
[ -x "$exec_only" ] || variants=${variants/ exec/}
qemu_path=$(command -v "$QEMU")

# cmd VARIANT SMP: the command line of one run.
cmd() {
  local guest="$QEMU $QEMU_BASE -smp $2 -bios $fw -device isa-debug-exit,iobase=0xf4,iosize=4"
  local mon="-chardev socket,id=orch,path=$BENCH_TMP/orch.sock,server=on,wait=off -mon chardev=orch,mode=control"
  case $1 in
    direct|qmp) echo "$guest" ;;
    exec) echo "$exec_only $qemu_path ${guest#"$QEMU" }" ;;
    mon) echo "$guest $mon" ;;
    mon-balanced) echo "$qp --mode=balanced -- $guest $mon" ;;
    args) echo "$args_only 64 $qemu_path ${guest#"$QEMU" }" ;;
    bind) echo "$args_only --parts=backend 64 $qemu_path ${guest#"$QEMU" }" ;;
    plan) echo "$qp plan --mode=balanced -- $guest" ;;
    *) echo "$qp --mode=$1 -- $guest" ;;
  esac
}

# run VARIANT SMP: one run, QEMU's exit status. "qmp" is QEMU started
# paused and resumed over QMP by the quickest possible client (the commands
# queued on stdin), the way libvirt and qemu-pin start guests.
run() {
  if [ "$1" = qmp ]; then
    printf '%s\n' '{"execute":"qmp_capabilities"}' '{"execute":"query-cpus-fast"}' \
      '{"execute":"cont"}' | $(cmd "$1" "$2") -S -qmp stdio
  else
    $(cmd "$1" "$2")
  fi
}

# pause VARIANT SMP: "yes" or "no" as qemu-pin's plan says, "-" otherwise.
pause() {
  case $1 in
    direct|exec|qmp|args|bind|plan|mon) echo "-"; return ;;
    mon-balanced) set -- balanced "$2" ;;
    none) echo "no"; return ;;
  esac
  $qp plan --mode="$1" -- $(cmd direct "$2") 2>/dev/null |
    awk '/"pause"/ { print ($3 ~ /true/) ? "yes" : "no"; found = 1 } END { if (!found) print "-" }'
}

# settle_keepers: waits (at most about 2 s) until no more keepers run than
# did when the bench started: the last run's keeper has released its claim.
# A keeper that has exited counts no more, even if nothing reaps it (an init
# that does not reap zombies): only running, sleeping, disk-waiting and
# stopped ones are counted.
live_keepers() { pgrep -c -x -r R,S,D,T qemu-pin-keeper; }
keepers_before=$(live_keepers)
settle_keepers() {
  local i
  for ((i = 0; i < 200; i++)); do
    [ "$(live_keepers)" -le "$keepers_before" ] && return
    sleep 0.005
  done
}

echo "| -smp | launched by | median ms | vs QEMU alone | added ms | added ms, paired | vs QEMU alone, paired | vs the pause floor, paired | runs | paused | vs QEMU alone, paired: 95% interval |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|"
: > "$BENCH_TMP/floors.md"
# paired_ratio FLOOR VARIANT: the median over rounds of VARIANT's time over
# FLOOR's in the same round, which a host whose load drifts disturbs less.
paired_ratios() { # FLOOR VARIANT: each round's ratio, a line each
  paste "$BENCH_TMP/t.$1" "$BENCH_TMP/t.$2" | awk '{ print $2 / $1 }'
}
paired_ratio() {
  paired_ratios "$1" "$2" | median
}
# floor_row SMP VARIANT FLOOR WHAT: VARIANT's paired ratio to FLOOR, for the
# second table.
floor_row() {
  [ -n "${ok[$2]:-}" ] && [ -n "${ok[$3]:-}" ] || return 0
  paired_ratio "$3" "$2" |
    awk -v s="$1" -v w="$4" '{ printf "| %s | %s | %.3f |\n", s, w, $1 }' >> "$BENCH_TMP/floors.md"
}
for smp in $smps; do
  rounds=$(rounds_at "$smp")
  declare -A ok=() why=()
  # One untimed run of each: it warms the caches and tells what runs here.
  for v in $variants; do
    run "$v" "$smp" >/dev/null 2>"$BENCH_TMP/err"
    rc=$?
    want=1; [ "$v" = plan ] && want=0
    if [ $rc -eq $want ] && ! grep -q '^qemu-pin: [^kwQ]' "$BENCH_TMP/err"; then
      ok[$v]=1
    else
      why[$v]=$(grep -m1 . "$BENCH_TMP/err" | sed 's/^qemu-pin: //; s/|/\\|/g')
      [ -n "${why[$v]}" ] || why[$v]="exit status $rc"
    fi
  done
  for v in $variants; do : > "$BENCH_TMP/t.$v"; done
  for ((r = 0; r < rounds; r++)); do
    for v in $(shuf -e $variants); do
      [ -n "${ok[$v]:-}" ] || continue
      now_us t0
      run "$v" "$smp" >/dev/null 2>&1
      now_us t1
      echo $(((t1 - t0))) >> "$BENCH_TMP/t.$v"
      # A keeper releases its claim after QEMU exits: untimed, it would
      # still run while the next variant starts, and charge that variant.
      settle_keepers
    done
  done
  base=$(median < "$BENCH_TMP/t.direct")
  for v in $variants; do
    case $v in
      direct) name="QEMU alone" ;;
      args) name="QEMU with a balanced launch's arguments, memory policy and monitor, no qemu-pin (QEMU's share)" ;;
      bind) name="QEMU with only the memory backend bound to the node (host-nodes), no qemu-pin" ;;
      qmp) name="QEMU -S, then cont over QMP (no qemu-pin)" ;;
      exec) name="QEMU exec'd by a program that does nothing else (the exec floor)" ;;
      mon) name="QEMU with an orchestrator's QMP monitor (no qemu-pin)" ;;
      mon-balanced) name="qemu-pin in mode balanced, QEMU with an orchestrator's QMP monitor" ;;
      plan) name="qemu-pin plan --mode=balanced (no launch)" ;;
      *) name="qemu-pin --mode=$v" ;;
    esac
    if [ -z "${ok[$v]:-}" ]; then
      echo "| $smp | $name | refused: ${why[$v]} | | | | | | 0 | | |"
      continue
    fi
    m=$(median < "$BENCH_TMP/t.$v")
    # Paired: the median over rounds of (this variant - QEMU alone) in the
    # same round, which a host whose load drifts disturbs less.
    d=$(paste "$BENCH_TMP/t.direct" "$BENCH_TMP/t.$v" | awk '{ print $2 - $1 }' | median)
    # The same as ratios, to QEMU alone and to the pause floor of the round.
    q=$(paired_ratio direct "$v")
    f=-
    [ -n "${ok[qmp]:-}" ] &&
      f=$(paired_ratio qmp "$v")
    p=$(pause "$v" "$smp")
    ci=$(paired_ratios direct "$v" | median_interval)
    awk -v s="$smp" -v n="$name" -v m="$m" -v b="$base" -v d="$d" -v q="$q" -v f="$f" -v r="$rounds" -v p="$p" -v ci="$ci" 'BEGIN {
      if (f != "-") f = sprintf("%.3f", f)
      split(ci, c, " ")
      i = (c[1] == "-") ? "-" : sprintf("%.3f-%.3f", c[1], c[2])
      printf "| %s | %s | %.1f | %.3f | %+.1f | %+.1f | %.3f | %s | %d | %s | %s |\n", s, n, m / 1000, m / b, (m - b) / 1000, d / 1000, q, f, r, p, i }'
  done
  floor_row "$smp" none exec "qemu-pin in mode none, against the exec floor"
  floor_row "$smp" bind exec "QEMU with only the memory backend bound to the node (host-nodes), against the exec floor"
  floor_row "$smp" mon-balanced mon "qemu-pin in mode balanced, against QEMU alone, both with an orchestrator's QMP monitor"
  unset ok why
done
if [ -s "$BENCH_TMP/floors.md" ]; then
  echo
  echo "| -smp | against its own floor | paired |"
  echo "|---:|---|---:|"
  cat "$BENCH_TMP/floors.md"
fi
