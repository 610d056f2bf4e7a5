#include "launcher/qemu/daemonize.h"

#include <json-glib/json-glib.h>

#include "launcher/qemu/keyval.h"
#include "launcher/qemu/option-table.h"

/* A memory backend of an -object value (key=value or JSON) without its
 * prealloc-context, or NULL when it is no such backend or has none. The id
 * goes to *ID. Never fails: what cannot be read is left as it is. */
static char *
backend_without_context(const char *value, char **id)
{
  if (value[0] != '{') {
    g_autoptr(GArray) kv = qp_kv_parse(value, "qom-type");
    const char *type = qp_kv_get(kv, "qom-type");
    if (type == NULL || !g_str_has_prefix(type, "memory-backend-") ||
        qp_kv_get(kv, "prealloc-context") == NULL)
      return NULL;
    *id = g_strdup(qp_kv_get(kv, "id"));
    return qp_kv_without(value, "prealloc-context");
  }
  g_autoptr(JsonParser) parser = json_parser_new();
  if (!json_parser_load_from_data(parser, value, -1, NULL))
    return NULL;
  JsonNode *root = json_parser_get_root(parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT(root))
    return NULL;
  JsonObject *obj = json_node_get_object(root);
  const char *type =
      json_object_get_string_member_with_default(obj, "qom-type", NULL);
  if (type == NULL || !g_str_has_prefix(type, "memory-backend-") ||
      !json_object_has_member(obj, "prealloc-context"))
    return NULL;
  *id = g_strdup(json_object_get_string_member_with_default(obj, "id", ""));
  json_object_remove_member(obj, "prealloc-context");
  return json_to_string(root, FALSE);
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
