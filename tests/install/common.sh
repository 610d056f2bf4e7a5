# Sourced by the install tests: a scratch directory $work named after
# $test_name, removed on exit with any VM qp_launch started, and the NUMA
# lab's helpers (tests/lab/lib.sh: assert_eq, fail, skip, qp_launch, ...).
work=$(mktemp -d "/tmp/qp-$test_name.XXXXXX")
QP_LAB_SCRATCH=$work
. "$QP_SOURCE_ROOT/tests/lab/lib.sh"
trap 'lab_cleanup || true; rm -rf "$work"' EXIT
