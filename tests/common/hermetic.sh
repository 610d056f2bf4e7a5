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
