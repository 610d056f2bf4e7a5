/* -readconfig FILE: QEMU's config file format, read as QEMU 7.2's
 * qemu_config_foreach() reads it ('[group]' or '[group "id"]' starts a
 * section, 'key = "value"' lines fill it, lines starting with '#' and empty
 * lines are skipped), and the options its sections stand for. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* OPTS (of QpOpt) with the options of each -readconfig file in place of it,
 * so that they merge with the command line's in QEMU's order. The values
 * read from files go to FILE_VALUES (of char*, each followed by its
 * "FILE:LINE [group]"), which must outlive the options. A file that cannot
 * be read is one line in WARNINGS (QEMU then says so itself); what QEMU
 * refuses in its syntax is refused here too. */
GArray *qp_readconfig_expand(GArray *opts, GPtrArray *file_values,
                             GPtrArray *warnings, GError **error);

/* When ERROR quotes a value of FILE_VALUES, says which file, line and
 * section it came from: the caller did not write the option. */
void qp_readconfig_name_source(GPtrArray *file_values, GError **error);

G_END_DECLS
