#!/bin/bash
# start-cost: qemu-pin's own time before it execs QEMU, and how long it holds
# the ledger's lock, with an empty ledger and with a full one.
#
# qemu-pin runs with QEMU_PIN_TIMING=1, which prints its steps' times since
# the front's main() ("qemu-pin: timing: STEP MS"); the guest exits at once.
# Reported, as medians of RUNS launches interleaved between the two ledgers:
#   before exec   the front's main() to execve() of QEMU;
#   loaded        the front's main() to the launch path begun (the static
#                 launcher loads nothing; before it was static, the dlopen
#                 of the launch path and its libraries, their constructors);
#   host          to the host loaded (hwloc, or its snapshot);
#   claim         the critical section: pre-scan, lock, read, plan, keeper
#                 configured (started just before the section), record
#                 written, unlock;
#   front         `qemu-pin --mode=none -- /bin/true` less /bin/true, wall:
#                 what mode none costs (the front's exec and decision);
#   loader        `qemu-pin --version` less /bin/true, wall: the front and
#                 the full program's libraries, before anything is done.
# The full ledger holds RECORDS live records (1 MiB and 2
# shared vCPUs each on node 0, naming a process that lives for the run),
# made by bench/plan-bench --fill.
#
# Usage: bench/start-cost.sh [--runs N] [--records N] [BUILDDIR]
set -u
. "$(dirname "$0")/lib.sh"

runs=21 records=1000 builddir=build
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --runs=*) runs=${1#*=}; shift ;;
    --records) records=$2; shift 2 ;;
    --records=*) records=${1#*=}; shift ;;
    -h|--help) sed -n '2,/^# Usage/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    -*) die "unknown option '$1' (expected --runs N, --records N)" ;;
    *) builddir=$1; shift ;;
  esac
done
case $runs in ''|*[!0-9]*|0) die "--runs '$runs' is not a positive number" ;; esac
qp=$(find_qemu_pin "$builddir")
fill=${QP_PLAN_BENCH:-$builddir/bench/plan-bench}
[ -x "$fill" ] || die "no plan-bench at $fill: ninja -C $builddir bench/plan-bench"

bench_tmpdir
fw=$BENCH_TMP/exit.bin
make_exit_firmware "$fw"
unset QEMU_PIN_MODE QEMU_PIN_VERBOSE
export QEMU_PIN_CONFIG=$BENCH_TMP/none.conf
: > "$QEMU_PIN_CONFIG"
empty=$BENCH_STATE.empty
full=$BENCH_STATE.full
sleep 100000 &
holder=$!
trap 'kill $holder 2>/dev/null; rm -rf "$BENCH_TMP" "${BENCH_STATE%/ledger}"' EXIT
"$fill" --fill "$full" --records "$records" --pid "$holder" || die "cannot fill $full"

# one LEDGER: the step times of one launch, "loaded host critical exec":
# the critical section runs from the last step before it (the keeper's
# start, else the host) to the claim. A step's name may have spaces.
one() {
  QEMU_PIN_TIMING=1 QEMU_PIN_STATE_DIR=$1 "$qp" --mode=balanced -- "$QEMU" $QEMU_BASE \
    -smp 1 -bios "$fw" -device isa-debug-exit,iobase=0xf4,iosize=4 2>&1 >/dev/null |
    awk '$1 == "qemu-pin:" && $2 == "timing:" {
           s = $3; for (i = 4; i < NF; i++) s = s " " $i; t[s] = $NF }
         END { b = ("keeper" in t) ? t["keeper"] : t["host"]
               print t["loaded"], t["host"], t["claim"] - b, t["exec"] }'
}

for l in empty full; do : > "$BENCH_TMP/$l"; done
: > "$BENCH_TMP/loader"; : > "$BENCH_TMP/front"
one "$empty" >/dev/null; one "$full" >/dev/null   # warm caches, build the summary
for ((r = 0; r < runs; r++)); do
  one "$empty" >> "$BENCH_TMP/empty"
  one "$full" >> "$BENCH_TMP/full"
  now_us t0; /bin/true; now_us t1; "$qp" --version >/dev/null; now_us t2
  echo $(((t2 - t1) - (t1 - t0))) >> "$BENCH_TMP/loader"
  now_us t0; /bin/true; now_us t1; "$qp" --mode=none -- /bin/true; now_us t2
  echo $(((t2 - t1) - (t1 - t0))) >> "$BENCH_TMP/front"
done
col() { awk -v c="$2" 'NF == 4 { print $c }' "$BENCH_TMP/$1" | median; }
loader=$(median < "$BENCH_TMP/loader")
front=$(median < "$BENCH_TMP/front")

echo "| ledger | before exec (ms) | full program loaded at (ms) | host loaded at (ms) | critical section (ms) | runs |"
echo "|---|---:|---:|---:|---:|---:|"
for l in empty full; do
  n=$(awk 'NF == 4' "$BENCH_TMP/$l" | wc -l)
  name="empty"; [ $l = full ] && name="$records live records"
  m=$(col $l 1) h=$(col $l 2) c=$(col $l 3) e=$(col $l 4)
  awk -v n="$name" -v m="$m" -v h="$h" -v c="$c" -v e="$e" -v r="$n" 'BEGIN {
    printf "| %s | %.3f | %.3f | %.3f | %.3f | %d |\n", n, e, m, h, c, r }'
done
awk -v l="$loader" -v f="$front" 'BEGIN {
  printf "\nMode none (the front alone, then the program): %.3f ms more than /bin/true; `qemu-pin --version` (the front and the full program loaded): %.3f ms more (medians).\n", f / 1000, l / 1000 }'
