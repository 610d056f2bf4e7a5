/* The one error of QEMU's command line as qemu-pin reads it: a value QEMU
 * 7.2 refuses too, said in one line that names the option, the value and
 * what was expected. */
#pragma once

#include <glib.h>

#include "qp-error.h"

G_BEGIN_DECLS

/* Sets ERROR to QP_ARGS_ERROR_INVALID with the message FORMAT, made one line
 * whatever the values it quotes hold. Returns FALSE. */
gboolean qp_args_invalid(GError **error, const char *format, ...)
    G_GNUC_PRINTF(2, 3);

G_END_DECLS
