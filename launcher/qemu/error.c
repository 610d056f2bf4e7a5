#include "launcher/qemu/error.h"

/* The quark's name is the argument as written. */
/* clang-format off */
G_DEFINE_QUARK(qp-args-error-quark, qp_args_error)
/* clang-format on */

gboolean
qp_args_invalid(GError **error, const char *format, ...)
{
  va_list ap;
  va_start(ap, format);
  g_autofree char *msg = g_strdup_vprintf(format, ap);
  va_end(ap);
  /* One line, whatever the value held. */
  for (char *p = msg; *p; p++)
    if (*p == '\n' || *p == '\r')
      *p = ' ';
  g_set_error_literal(error, QP_ARGS_ERROR, QP_ARGS_ERROR_INVALID, msg);
  return FALSE;
}
