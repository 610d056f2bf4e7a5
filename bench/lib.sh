# Shared helpers of the bench/*.sh scripts (bash; sourced, not run).

# The QEMU command line every launch benchmark uses: q35 under TCG, no
# devices but the debug-exit port, 64 MiB.
QEMU=${QEMU:-qemu-system-x86_64}
QEMU_BASE="-machine q35 -accel tcg -display none -nodefaults -m 64"

die() { echo "${0##*/}: $*" >&2; exit 1; }

# bench_tmpdir: a private scratch directory, and BENCH_STATE, a ledger
# directory on a tmpfs as /run is on most hosts (/dev/shm when it is one,
# else the scratch directory); both removed on exit.
bench_tmpdir() {
  BENCH_TMP=$(mktemp -d "${TMPDIR:-/tmp}/qp-bench.XXXXXX") || die "cannot create a temporary directory"
  BENCH_STATE=
  if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] && [ -w /dev/shm ]; then
    BENCH_STATE=$(mktemp -d /dev/shm/qp-bench-state.XXXXXX) || BENCH_STATE=
  fi
  if [ -n "$BENCH_STATE" ]; then
    BENCH_STATE_FS=tmpfs
  else
    BENCH_STATE=$BENCH_TMP/state-dir
    mkdir "$BENCH_STATE"
    BENCH_STATE_FS=$(stat -f -c %T "$BENCH_STATE")
  fi
  BENCH_STATE=$BENCH_STATE/ledger
  trap 'rm -rf "$BENCH_TMP" "${BENCH_STATE%/ledger}"' EXIT
}

# make_firmware FILE BYTES...: a 64 KiB firmware whose bytes at 0xFFF0 are
# BYTES (octal escapes for printf), zeros elsewhere.
make_firmware() {
  local f=$1; shift
  local code
  code=$(printf "$@" | wc -c)
  { head -c 65520 /dev/zero; printf "$@"; head -c $((16 - code)) /dev/zero; } > "$f"
  [ "$(wc -c < "$f")" -eq 65536 ] || die "firmware $f is not 64 KiB"
}

# Exit at once: mov al,0; out 0xf4,al; hlt; hlt (QEMU exits 1).
make_exit_firmware() { make_firmware "$1" '\260\000\346\364\364'; }
# Halt forever: cli; hlt; jmp back.
make_halt_firmware() { make_firmware "$1" '\372\364\353\375'; }

# now_us VAR: sets VAR to the wall clock in microseconds, without a fork
# ($(now_us) would fork a subshell, whose exit came after the reading and
# was timed with the run).
now_us() {
  printf -v "$1" '%s' "${EPOCHREALTIME/./}"
}

# median: the median of the numbers on stdin (one a line).
median() {
  sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) { print "nan"; exit }
    if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# median_interval: "LOW HIGH", the 95% confidence interval of the median of
# the numbers on stdin, from their order statistics (no assumption about
# their distribution): the ranks n/2 -+ 0.98 sqrt(n), the normal
# approximation of the binomial. "- -" for fewer than 6 numbers, which give
# no 95% interval this way.
median_interval() {
  sort -g | awk '{ v[NR] = $1 } END {
    if (NR < 6) { print "- -"; exit }
    h = 0.98 * sqrt(NR)
    lo = int(NR / 2 - h); if (lo < 1) lo = 1
    hi = int(NR / 2 + 1 + h + 0.999999); if (hi > NR) hi = NR
    print v[lo], v[hi] }'
}

# find_qemu_pin BUILDDIR: the built qemu-pin.
find_qemu_pin() {
  local b=${QP_BINARY:-${1:-build}/qemu-pin}
  [ -x "$b" ] || die "no qemu-pin at $b: build it (meson setup build && ninja -C build) or set QP_BINARY"
  echo "$b"
}
