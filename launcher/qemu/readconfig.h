/* QEMU's config file format (-readconfig FILE), read as QEMU 7.2's
 * qemu_config_foreach() reads it: '[group]' or '[group "id"]' starts a
 * section, 'key = "value"' lines fill it, lines starting with '#' and empty
 * lines are skipped. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  char *group; /* "machine", "device", "object", "smp-opts", "memory", ... */
  char *id;    /* from '[group "id"]', or NULL */
  guint line;  /* of the header */
  GPtrArray *keys;   /* of char*, in file order */
  GPtrArray *values; /* of char*, parallel to keys */
} QpConfigSection;

void qp_config_section_free(QpConfigSection *section);

/* The sections of PATH (of QpConfigSection). NULL with a G_FILE_ERROR when
 * the file cannot be read or is not a regular file (a pipe read here would
 * be read away from QEMU), or with QP_ARGS_ERROR_INVALID for what QEMU 7.2
 * refuses in the file's syntax too: a key before any group ("no group
 * defined") and a line that is neither ("parse error"). What the keys mean
 * is left to the options they become. */
GPtrArray *qp_readconfig_read(const char *path, GError **error);

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
