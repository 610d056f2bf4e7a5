#include "launcher/qemu/props.h"

#include <string.h>

#include "launcher/qemu/error.h"
#include "launcher/qemu/keyval.h"
#include "launcher/qemu/numbers.h"
#include "topology/base/cpulist.h"

gboolean
qp_props_read(QpProps *p, const char *option, const char *text,
              const char *implied, GError **error)
{
  memset(p, 0, sizeof(*p));
  p->option = option;
  p->text = text;
  p->implied = implied;
  if (text[0] != '{') {
    p->kv = qp_kv_parse(text, implied);
    p->edited = g_string_new(text);
    return TRUE;
  }
  g_autoptr(GError) local = NULL;
  g_autoptr(QpJv) root = qp_jv_parse(text, -1, &local);
  if (root == NULL)
    return qp_args_invalid(error, "%s '%s' is not valid JSON: %s", option, text,
                           local->message);
  if (!qp_jv_is(root, QP_JV_OBJECT))
    return qp_args_invalid(error, "%s '%s': expected a JSON object", option,
                           text);
  p->json = g_steal_pointer(&root);
  return TRUE;
}

void
qp_props_clear(QpProps *p)
{
  if (p->kv != NULL)
    g_array_unref(p->kv);
  if (p->edited != NULL)
    g_string_free(p->edited, TRUE);
  g_clear_pointer(&p->json, qp_jv_free);
  memset(p, 0, sizeof(*p));
}

/* The JSON member KEY when it is a value of TYPE, else NULL. */
static const QpJv *
json_value(const QpProps *p, const char *key, QpJvType type)
{
  const QpJv *n = qp_jv_get(p->json, key);
  return qp_jv_is(n, type) ? n : NULL;
}

static gboolean
json_type_ok(const QpProps *p, const char *key, QpPropType type)
{
  switch (type) {
  case QP_PROP_BOOL:
    return json_value(p, key, QP_JV_BOOL) != NULL;
  case QP_PROP_SIZE:
    return json_value(p, key, QP_JV_INT) != NULL &&
           qp_jv_get_int(qp_jv_get(p->json, key)) >= 0;
  case QP_PROP_STRING:
    return json_value(p, key, QP_JV_STRING) != NULL;
  }
  return FALSE;
}

static gboolean
json_type_error(const QpProps *p, const char *key, QpPropType type,
                GError **error)
{
  static const char *const expected[] = {
      [QP_PROP_BOOL] = "true or false",
      [QP_PROP_SIZE] = "a non-negative integer (bytes)",
      [QP_PROP_STRING] = "a string",
  };
  return qp_args_invalid(error, "%s '%s': '%s' must be %s", p->option, p->text,
                         key, expected[type]);
}

gboolean
qp_props_check(const QpProps *p, const QpPropSchema *schema, GError **error)
{
  if (p->json == NULL)
    return TRUE;
  for (guint i = 0; i < qp_jv_len(p->json); i++)
    for (const QpPropSchema *s = schema; s->key != NULL; s++)
      if (strcmp(s->key, qp_jv_key(p->json, i)) == 0 &&
          !json_type_ok(p, s->key, s->type))
        return json_type_error(p, s->key, s->type, error);
  return TRUE;
}

gboolean
qp_props_has(const QpProps *p, const char *key)
{
  return p->json != NULL ? qp_jv_get(p->json, key) != NULL
                         : qp_kv_get(p->kv, key) != NULL;
}

const char *
qp_props_string(const QpProps *p, const char *key)
{
  if (p->json == NULL)
    return qp_kv_get(p->kv, key);
  return qp_jv_get_string(json_value(p, key, QP_JV_STRING));
}

gboolean
qp_props_get_string(const QpProps *p, const char *key, const char **out,
                    GError **error)
{
  *out = qp_props_string(p, key);
  if (*out == NULL && p->json != NULL && qp_jv_get(p->json, key) != NULL)
    return json_type_error(p, key, QP_PROP_STRING, error);
  return TRUE;
}

gboolean
qp_props_bool(const QpProps *p, const char *key, gboolean *out, GError **error)
{
  if (!qp_props_has(p, key))
    return TRUE;
  if (p->json != NULL) {
    if (!json_type_ok(p, key, QP_PROP_BOOL))
      return json_type_error(p, key, QP_PROP_BOOL, error);
    *out = qp_jv_get_bool(qp_jv_get(p->json, key));
    return TRUE;
  }
  const char *v = qp_kv_get(p->kv, key);
  if (!qp_parse_bool(v, out))
    return qp_args_invalid(error, "%s '%s': %s '%s' is not on or off",
                           p->option, p->text, key, v);
  return TRUE;
}

gboolean
qp_props_size(const QpProps *p, const char *key, guint64 *out, gboolean *given,
              GError **error)
{
  *given = qp_props_has(p, key);
  if (!*given)
    return TRUE;
  if (p->json != NULL) {
    if (!json_type_ok(p, key, QP_PROP_SIZE))
      return json_type_error(p, key, QP_PROP_SIZE, error);
    *out = (guint64)qp_jv_get_int(qp_jv_get(p->json, key));
    return TRUE;
  }
  g_autofree char *what =
      g_strdup_printf("%s '%s': %s", p->option, p->text, key);
  return qp_parse_size(qp_kv_get(p->kv, key), what, FALSE, out, error);
}

gboolean
qp_props_index_set(const QpProps *p, const char *key, guint64 max,
                   hwloc_bitmap_t *out, GError **error)
{
  if (p->json == NULL)
    return qp_kv_index_set(p->kv, key, max, p->option, p->text, out, error);
  const QpJv *arr = qp_jv_get(p->json, key);
  if (arr == NULL)
    return TRUE;
  if (!qp_jv_is(arr, QP_JV_ARRAY))
    return qp_args_invalid(error,
                           "%s '%s': '%s' must be an array of node "
                           "numbers",
                           p->option, p->text, key);
  g_auto(hwloc_bitmap_t) set = hwloc_bitmap_alloc();
  for (guint i = 0; i < qp_jv_len(arr); i++) {
    const QpJv *e = qp_jv_item(arr, i);
    if (!qp_jv_is(e, QP_JV_INT) || qp_jv_get_int(e) < 0 ||
        (guint64)qp_jv_get_int(e) > max)
      return qp_args_invalid(
          error,
          "%s '%s': '%s' must hold integers from 0 to %" G_GUINT64_FORMAT,
          p->option, p->text, key, max);
    hwloc_bitmap_set(set, (unsigned)qp_jv_get_int(e));
  }
  *out = g_steal_pointer(&set);
  return TRUE;
}

gboolean
qp_props_bool_or(const QpProps *p, const char *key, gboolean fallback)
{
  gboolean v = fallback;
  if (p->json != NULL)
    return json_type_ok(p, key, QP_PROP_BOOL)
               ? qp_jv_get_bool(qp_jv_get(p->json, key))
               : fallback;
  return qp_parse_bool(qp_kv_get(p->kv, key), &v) ? v : fallback;
}

guint64
qp_props_uint_or_zero(const QpProps *p, const char *key)
{
  guint64 v = 0;
  if (p->json != NULL)
    return json_type_ok(p, key, QP_PROP_SIZE)
               ? (guint64)qp_jv_get_int(qp_jv_get(p->json, key))
               : 0;
  return qp_parse_uint(qp_kv_get(p->kv, key), G_MAXUINT64, &v) ? v : 0;
}

guint64
qp_props_size_or_zero(const QpProps *p, const char *key)
{
  guint64 v = 0;
  if (p->json != NULL)
    return qp_props_uint_or_zero(p, key);
  const char *text = qp_kv_get(p->kv, key);
  return text != NULL && qp_parse_size(text, key, FALSE, &v, NULL) ? v : 0;
}

void
qp_props_set_string(QpProps *p, const char *key, const char *value)
{
  if (p->json != NULL)
    qp_jv_set(p->json, key, qp_jv_string(value));
  else
    qp_kv_append(p->edited, key, value);
}

void
qp_props_set_index_set(QpProps *p, const char *key, hwloc_const_bitmap_t set)
{
  if (p->json == NULL) {
    qp_kv_append_set(p->edited, key, set);
    return;
  }
  QpJv *arr = qp_jv_array();
  int n;
  hwloc_bitmap_foreach_begin(n, set) qp_jv_add(arr, qp_jv_int(n));
  hwloc_bitmap_foreach_end();
  qp_jv_set(p->json, key, arr);
}

void
qp_props_remove(QpProps *p, const char *key)
{
  if (p->json != NULL) {
    qp_jv_remove(p->json, key);
    return;
  }
  g_autofree char *without = qp_kv_without(p->edited->str, key, p->implied);
  g_string_assign(p->edited, without);
}

char *
qp_props_to_text(const QpProps *p)
{
  if (p->json == NULL)
    return g_strdup(p->edited->str);
  return qp_jv_write(p->json, FALSE);
}
