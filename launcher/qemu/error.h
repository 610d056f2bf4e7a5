/* The one error of QEMU's command line as qemu-pin reads it: a value QEMU
 * 7.2 refuses too, said in one line that names the option, the value and
 * what was expected. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define QP_ARGS_ERROR (qp_args_error_quark())
GQuark qp_args_error_quark(void);

typedef enum {
  QP_ARGS_ERROR_INVALID, /* a malformed value in an option we must read */
} QpArgsError;

/* Sets ERROR to QP_ARGS_ERROR_INVALID with the message FORMAT, made one line
 * whatever the values it quotes hold. Returns FALSE. */
gboolean qp_args_invalid(GError **error, const char *format, ...)
    G_GNUC_PRINTF(2, 3);

G_END_DECLS
