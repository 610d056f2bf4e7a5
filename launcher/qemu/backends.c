/* The memory backends of -object, as QEMU 7.2's hostmem backends read
 * their properties. */
#include "launcher/qemu/backends.h"

#include <json-glib/json-glib.h>
#include <string.h>

#include "launcher/qemu/keyval.h"
#include "launcher/qemu/machine.h"
#include "launcher/qemu/memory.h"
#include "launcher/qemu/numbers.h"

void
qp_backend_free(gpointer p)
{
  QpBackend *b = p;
  g_free(b->id);
  g_free(b->qom_type);
  g_free(b->mem_path);
  hwloc_bitmap_free(b->host_nodes);
  g_free(b);
}

QpBackend *
qp_backend_find(const QpQemuArgs *a, const char *id)
{
  for (guint i = 0; id != NULL && i < a->backends->len; i++) {
    QpBackend *b = g_ptr_array_index(a->backends, i);
    if (strcmp(b->id, id) == 0)
      return b;
  }
  return NULL;
}

static gboolean
json_list(JsonNode *node, const char *key, guint64 max, const char *text,
          hwloc_bitmap_t *out, GError **error)
{
  if (!JSON_NODE_HOLDS_ARRAY(node))
    return qp_args_invalid(
        error, "-object '%s': '%s' must be an array of node numbers", text,
        key);
  JsonArray *arr = json_node_get_array(node);
  g_auto(hwloc_bitmap_t) set = hwloc_bitmap_alloc();
  for (guint i = 0; i < json_array_get_length(arr); i++) {
    JsonNode *e = json_array_get_element(arr, i);
    if (!JSON_NODE_HOLDS_VALUE(e) ||
        json_node_get_value_type(e) != G_TYPE_INT64 ||
        json_node_get_int(e) < 0 || (guint64)json_node_get_int(e) > max)
      return qp_args_invalid(
          error,
          "-object '%s': '%s' must hold integers from 0 to %" G_GUINT64_FORMAT,
          text, key, max);
    hwloc_bitmap_set(set, (unsigned)json_node_get_int(e));
  }
  *out = g_steal_pointer(&set);
  return TRUE;
}

static const char *const json_bool_keys[] = {
    "prealloc", "hugetlb", "share", "merge", "dump", "reserve", NULL};
static const char *const json_size_keys[] = {"size", "hugetlbsize", "align",
                                             NULL};
static const char *const json_string_keys[] = {"mem-path", "policy",
                                               "prealloc-context", NULL};

/* The memory backend of a JSON -object. */
static gboolean
backend_from_json(JsonObject *obj, const char *text, QpBackend *b,
                  gboolean *has_size, GError **error)
{
  GList *members = json_object_get_members(obj);
  for (GList *l = members; l; l = l->next) {
    const char *key = l->data;
    JsonNode *n = json_object_get_member(obj, key);
    gboolean ok = TRUE;
    if (g_strv_contains(json_bool_keys, key))
      ok = JSON_NODE_HOLDS_VALUE(n) &&
           json_node_get_value_type(n) == G_TYPE_BOOLEAN;
    else if (g_strv_contains(json_size_keys, key))
      ok = JSON_NODE_HOLDS_VALUE(n) &&
           json_node_get_value_type(n) == G_TYPE_INT64 &&
           json_node_get_int(n) >= 0;
    else if (g_strv_contains(json_string_keys, key))
      ok = JSON_NODE_HOLDS_VALUE(n) &&
           json_node_get_value_type(n) == G_TYPE_STRING;
    if (!ok) {
      g_list_free(members);
      const char *expected = g_strv_contains(json_bool_keys, key)
                                 ? "true or false"
                             : g_strv_contains(json_size_keys, key)
                                 ? "a non-negative integer (bytes)"
                                 : "a string";
      return qp_args_invalid(error, "-object '%s': '%s' must be %s", text, key,
                             expected);
    }
  }
  g_list_free(members);

  if (json_object_has_member(obj, "size")) {
    *has_size = TRUE;
    b->size_bytes = (guint64)json_object_get_int_member(obj, "size");
  }
  if (json_object_has_member(obj, "prealloc"))
    b->prealloc = json_object_get_boolean_member(obj, "prealloc");
  if (json_object_has_member(obj, "hugetlb"))
    b->hugetlb = json_object_get_boolean_member(obj, "hugetlb");
  if (json_object_has_member(obj, "hugetlbsize"))
    b->hugetlbsize_kib =
        (guint64)json_object_get_int_member(obj, "hugetlbsize") / 1024;
  if (json_object_has_member(obj, "mem-path"))
    b->mem_path = g_strdup(json_object_get_string_member(obj, "mem-path"));
  if (json_object_has_member(obj, "policy")) {
    const char *p = json_object_get_string_member(obj, "policy");
    if (!qp_policy_parse(p, &b->policy))
      return qp_args_invalid(error,
                             "-object '%s': policy '%s' is not one of default, "
                             "preferred, bind, interleave",
                             text, p);
  }
  if (json_object_has_member(obj, "host-nodes") &&
      !json_list(json_object_get_member(obj, "host-nodes"), "host-nodes",
                 QP_MAX_NODES - 1, text, &b->host_nodes, error))
    return FALSE;
  return TRUE;
}

/* The memory backend of a key=value -object. */
static gboolean
backend_from_kv(GArray *kv, const char *text, QpBackend *b, gboolean *has_size,
                GError **error)
{
  const char *v;
  g_autofree char *what = g_strdup_printf("-object '%s': size", text);

  if ((v = qp_kv_get(kv, "size")) != NULL) {
    if (!qp_parse_size(v, what, FALSE, &b->size_bytes, error))
      return FALSE;
    *has_size = TRUE;
  }
  static const char *const bools[] = {"prealloc", "hugetlb", NULL};
  for (guint i = 0; bools[i]; i++) {
    gboolean flag;
    if ((v = qp_kv_get(kv, bools[i])) == NULL)
      continue;
    if (!qp_parse_bool(v, &flag))
      return qp_args_invalid(error, "-object '%s': %s '%s' is not on or off",
                             text, bools[i], v);
    if (i == 0)
      b->prealloc = flag;
    else
      b->hugetlb = flag;
  }
  if ((v = qp_kv_get(kv, "hugetlbsize")) != NULL) {
    guint64 bytes;
    g_free(what);
    what = g_strdup_printf("-object '%s': hugetlbsize", text);
    if (!qp_parse_size(v, what, FALSE, &bytes, error))
      return FALSE;
    b->hugetlbsize_kib = bytes / 1024;
  }
  if ((v = qp_kv_get(kv, "mem-path")) != NULL)
    b->mem_path = g_strdup(v);
  if ((v = qp_kv_get(kv, "policy")) != NULL && !qp_policy_parse(v, &b->policy))
    return qp_args_invalid(error,
                           "-object '%s': policy '%s' is not one of default, "
                           "preferred, bind, interleave",
                           text, v);
  return qp_kv_index_set(kv, "host-nodes", QP_MAX_NODES - 1, "-object", text,
                         &b->host_nodes, error);
}

gboolean
qp_object_read(QpQemuArgs *a, const QpOpt *o, GError **error)
{
  const char *text = o->value;
  g_autofree char *qom_type = NULL, *id = NULL;
  g_autoptr(JsonParser) parser = NULL;
  g_autoptr(GArray) kv = NULL;
  JsonObject *obj = NULL;

  if (text[0] == '{') {
    g_autoptr(GError) local = NULL;
    parser = json_parser_new();
    if (!json_parser_load_from_data(parser, text, -1, &local))
      return qp_args_invalid(error, "-object '%s' is not valid JSON: %s", text,
                             local->message);
    JsonNode *root = json_parser_get_root(parser);
    if (root == NULL || !JSON_NODE_HOLDS_OBJECT(root))
      return qp_args_invalid(error, "-object '%s': expected a JSON object",
                             text);
    obj = json_node_get_object(root);
    JsonNode *t = json_object_get_member(obj, "qom-type");
    JsonNode *i = json_object_get_member(obj, "id");
    if (t == NULL || !JSON_NODE_HOLDS_VALUE(t) ||
        json_node_get_value_type(t) != G_TYPE_STRING)
      return qp_args_invalid(error, "-object '%s': 'qom-type' must be a string",
                             text);
    if (i != NULL && (!JSON_NODE_HOLDS_VALUE(i) ||
                      json_node_get_value_type(i) != G_TYPE_STRING))
      return qp_args_invalid(error, "-object '%s': 'id' must be a string",
                             text);
    qom_type = g_strdup(json_node_get_string(t));
    id = i ? g_strdup(json_node_get_string(i)) : NULL;
  } else {
    kv = qp_kv_parse(text, "qom-type");
    qom_type = g_strdup(qp_kv_get(kv, "qom-type"));
    id = g_strdup(qp_kv_get(kv, "id"));
  }

  if (qom_type == NULL)
    return TRUE; /* QEMU says what is wrong */
  if (strcmp(qom_type, "iothread") == 0) {
    a->req->n_iothreads++;
    return TRUE;
  }
  if (!g_str_has_prefix(qom_type, "memory-backend-"))
    return TRUE;

  if (id == NULL || *id == '\0')
    return qp_args_invalid(error, "-object '%s': a memory backend needs an id",
                           text);
  if (qp_backend_find(a, id) != NULL)
    return qp_args_invalid(error,
                           "-object '%s': id '%s' is already used by another "
                           "memory backend",
                           text, id);

  g_autoptr(GPtrArray) holder = g_ptr_array_new_with_free_func(qp_backend_free);
  QpBackend *b = g_new0(QpBackend, 1);
  g_ptr_array_add(holder, b);
  b->id = g_steal_pointer(&id);
  b->qom_type = g_steal_pointer(&qom_type);
  b->argi = o->vi;
  b->json = obj != NULL;
  gboolean has_size = FALSE;
  if (obj ? !backend_from_json(obj, text, b, &has_size, error)
          : !backend_from_kv(kv, text, b, &has_size, error))
    return FALSE;

  if (has_size && b->size_bytes == 0)
    return qp_args_invalid(error,
                           "-object '%s': size 0 is not a memory size: "
                           "expected more than 0 bytes",
                           text);
  if (!has_size && strcmp(b->qom_type, "memory-backend-file") != 0)
    return qp_args_invalid(
        error, "-object '%s': memory backend '%s' needs a size", text, b->id);
  b->size_mib = qp_bytes_to_mib(b->size_bytes);
  b->prealloc_context = obj ? json_object_has_member(obj, "prealloc-context")
                            : qp_kv_get(kv, "prealloc-context") != NULL;
  if (b->policy == QP_POLICY_BIND && b->host_nodes == NULL)
    return qp_args_invalid(error, "-object '%s': policy bind needs host-nodes",
                           text);
  if (b->host_nodes != NULL && b->policy == QP_POLICY_DEFAULT)
    return qp_args_invalid(error,
                           "-object '%s': host-nodes needs a policy other "
                           "than default (bind, preferred or interleave)",
                           text);
  qp_backend_classify(b, text);
  g_ptr_array_add(a->backends, g_ptr_array_steal_index(holder, 0));
  return TRUE;
}
