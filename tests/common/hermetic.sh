# Sourced (POSIX sh) by every shell test before it runs qemu-pin: the
# caller's QEMU_PIN_* variables are dropped and QEMU_PIN_CONFIG names an
# empty configuration, so that neither the host's /etc/qemu-pin/qemu-pin.conf
# nor the environment of whoever runs the tests reaches the qemu-pin under
# test. A test that wants a setting gives it itself. The C tests do the same
# before main() (tests/common/qp-test-env.c).
for _qp_var in $(env | sed -n 's/^\(QEMU_PIN_[A-Za-z0-9_]*\)=.*/\1/p'); do
  unset "$_qp_var"
done
unset _qp_var
export QEMU_PIN_CONFIG=/dev/null

# qp_wait_gone DIR: waits (at most 30 s) until no process runs whose command
# line has "-pidfile DIR/": the VMs a test started with their pid files in
# DIR, and their keepers, which release their claims in the ledger after
# QEMU is gone (until they have, a ledger under DIR is not the test's to
# remove). An exited process counts as gone though nobody may reap it.
# Returns 1, naming them on stderr and killing them, if some are still there.
qp_wait_gone() {
  for _qp_i in $(seq 300); do
    _qp_left=$(pgrep -r R,S,D,T -f -- "-pidfile $1/" | tr '\n' ' ')
    [ -z "$_qp_left" ] && return 0
    sleep 0.1
  done
  echo "still running 30 s after their VMs were killed: $_qp_left" >&2
  kill -KILL $_qp_left 2>/dev/null
  return 1
}
