# Sourced (POSIX sh) by the shell tests that start real QEMU guests
# (tests/launch/check-move.sh, check-move-stops.sh, check-rebalance.sh):
# hermetic settings (hermetic.sh), QEMU or a TAP skip, a scratch directory
# $T with the ledger $SD in it, whose VMs (their pids in $T/*.pid) are
# killed and waited for on exit, and TAP helpers: ok, not_ok, skip, check.
# The test ends with `exit $failed`.
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
skip() { n=$((n + 1)); echo "ok $n # SKIP $1"; }
check() { # NAME WANT GOT
  if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1: expected '$2', got '$3'"; fi
}
