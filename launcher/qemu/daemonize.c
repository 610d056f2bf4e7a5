#include "launcher/qemu/daemonize.h"

#include "launcher/qemu/option-table.h"
#include "launcher/qemu/props.h"

/* A memory backend of an -object value (key=value or JSON) without its
 * prealloc-context, or NULL when it is no such backend or has none. The id
 * goes to *ID. Never fails: what cannot be read is left as it is. */
static char *
backend_without_context(const char *value, char **id)
{
  g_auto(QpProps) p = {0};
  if (!qp_props_read(&p, "-object", value, "qom-type", NULL))
    return NULL;
  const char *type = qp_props_string(&p, "qom-type");
  if (type == NULL || !g_str_has_prefix(type, "memory-backend-") ||
      !qp_props_has(&p, "prealloc-context"))
    return NULL;
  *id = g_strdup(qp_props_string(&p, "id"));
  qp_props_remove(&p, "prealloc-context");
  return qp_props_to_text(&p);
}

char **
qp_argv_daemonize_safe(guint argc, char **argv, char **dropped)
{
  const char *missing;
  g_autoptr(GArray) opts = qp_opts_scan(argc, argv, &missing);
  gboolean daemonize = FALSE;
  for (guint i = 0; i < opts->len; i++)
    daemonize |= qp_opt_is(&g_array_index(opts, QpOpt, i), "daemonize");
  *dropped = NULL;
  if (!daemonize)
    return NULL;
  g_autoptr(GString) ids = g_string_new(NULL);
  char **out = NULL;
  for (guint i = 0; i < opts->len; i++) {
    const QpOpt *o = &g_array_index(opts, QpOpt, i);
    g_autofree char *id = NULL;
    char *edited = qp_opt_is(o, "object") && o->value != NULL
                       ? backend_without_context(o->value, &id)
                       : NULL;
    if (edited == NULL)
      continue;
    if (out == NULL) {
      out = g_new0(char *, (gsize)argc + 1);
      for (guint k = 0; k < argc; k++)
        out[k] = g_strdup(argv[k]);
    }
    g_free(out[o->vi]);
    out[o->vi] = edited;
    g_string_append_printf(ids, "%s%s", ids->len ? ", " : "", id ? id : "");
  }
  if (out != NULL)
    *dropped = g_strdup(ids->str);
  return out;
}
