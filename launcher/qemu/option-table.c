/* QEMU's options into a GArray; the table itself, and what asks for help,
 * are the front's (launcher/front/qemu-argv.c). */
#include "launcher/qemu/option-table.h"

GArray *
qp_opts_scan(guint argc, char **argv, const char **missing)
{
  GArray *opts = g_array_new(FALSE, TRUE, sizeof(QpOpt));
  QpOpt o;
  for (unsigned pos = 0; qp_opt_next(argc, argv, &pos, &o, missing);)
    g_array_append_val(opts, o);
  return opts;
}
