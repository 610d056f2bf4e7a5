#include "tests/common/qp-test-args.h"

QpQemuArgs *
qp_test_parse_ok(const char *const *argv)
{
  g_autoptr(GError) error = NULL;
  QpQemuArgs *a =
      qp_qemu_args_parse(g_strv_length((char **)argv), (char **)argv, &error);
  g_assert_no_error(error);
  return a;
}
