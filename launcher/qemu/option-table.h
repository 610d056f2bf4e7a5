/* QEMU's option table: which options take an argument, which print
 * something and exit, and a command line read into its options the way
 * QEMU's lookup_opt() reads it. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The argv index of an option read from a -readconfig file. */
#define QP_ARGI_IN_FILE G_MAXUINT

/* One option of the command line. */
typedef struct {
  const char *name;  /* without its dashes */
  guint i;           /* argv index of the option, or QP_ARGI_IN_FILE */
  const char *value; /* NULL if it takes none */
  guint vi;          /* argv index of the value, or QP_ARGI_IN_FILE */
} QpOpt;

/* The options of ARGV in order (of QpOpt, pointing into ARGV): "--opt" is
 * "-opt"; an option in the table takes the next argument whatever it looks
 * like; a word without a dash is a disk image. *MISSING is the last option
 * when it lacks its argument. */
GArray *qp_opts_scan(guint argc, char **argv, const char **missing);

gboolean qp_opt_is(const QpOpt *o, const char *name);

/* Whether O makes QEMU print something and exit (help, version, a
 * property list) instead of running a VM. */
gboolean qp_opt_wants_help(const QpOpt *o);

G_END_DECLS
