/* QEMU's option table: which options take an argument, which print
 * something and exit, and a command line read into its options the way
 * QEMU's lookup_opt() reads it. */
#pragma once

#include <glib.h>

#include "launcher/front/qemu-argv.h"

G_BEGIN_DECLS

/* The argv index of an option read from a -readconfig file. */
#define QP_ARGI_IN_FILE G_MAXUINT

/* The options of ARGV in order (of QpOpt, pointing into ARGV), read by
 * qp_opt_next(). *MISSING is the last option when it lacks its argument. */
GArray *qp_opts_scan(guint argc, char **argv, const char **missing);

G_END_DECLS
