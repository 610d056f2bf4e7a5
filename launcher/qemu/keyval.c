#include "launcher/qemu/keyval.h"

#include <string.h>

#include "launcher/qemu/error.h"
#include "launcher/qemu/numbers.h"
#include "topology/base/cpulist.h"

static void
kv_pair_clear(gpointer p)
{
  QpKvPair *kv = p;
  g_free(kv->key);
  g_free(kv->value);
}

GArray *
qp_kv_new(void)
{
  GArray *a = g_array_new(FALSE, TRUE, sizeof(QpKvPair));
  g_array_set_clear_func(a, kv_pair_clear);
  return a;
}

void
qp_kv_parse_into(GArray *kv, const char *text, const char *implied)
{
  QpKvItem it;
  size_t pos = 0;
  while (qp_kv_next(text, &pos, implied, &it)) {
    QpKvPair pair = {.key = g_strndup(it.key, it.key_len),
                     .value = qp_kv_item_value(&it),
                     .flag = it.flag,
                     .text = text,
                     .start = it.start,
                     .len = it.len};
    if (pair.value == NULL)
      g_error("out of memory");
    g_array_append_val(kv, pair);
  }
}

GArray *
qp_kv_parse(const char *text, const char *implied)
{
  GArray *kv = qp_kv_new();
  qp_kv_parse_into(kv, text, implied);
  return kv;
}

QpKvPair *
qp_kv_last(GArray *kv, const char *key)
{
  for (guint i = kv->len; i > 0; i--) {
    QpKvPair *p = &g_array_index(kv, QpKvPair, i - 1);
    if (strcmp(p->key, key) == 0)
      return p;
  }
  return NULL;
}

const char *
qp_kv_get(GArray *kv, const char *key)
{
  QpKvPair *p = qp_kv_last(kv, key);
  return p ? p->value : NULL;
}

gboolean
qp_kv_wants_help(GArray *kv)
{
  for (guint i = 0; i < kv->len; i++) {
    QpKvPair *p = &g_array_index(kv, QpKvPair, i);
    if (p->flag && qp_is_help_word(p->key))
      return TRUE;
  }
  return FALSE;
}

gboolean
qp_kv_check_keys(GArray *kv, const char *const *known, const char *option,
                 const char *expected, GError **error)
{
  for (guint i = 0; i < kv->len; i++) {
    const QpKvPair *p = &g_array_index(kv, QpKvPair, i);
    if (!g_strv_contains(known, p->key))
      return qp_args_invalid(
          error, "%s '%s': unknown parameter '%s': expected %s", option,
          qp_kv_last(kv, p->key)->text, p->key, expected);
  }
  return TRUE;
}

gboolean
qp_kv_index_set(GArray *kv, const char *key, guint64 max, const char *what,
                const char *text, hwloc_bitmap_t *out, GError **error)
{
  g_auto(hwloc_bitmap_t) set = NULL;
  for (guint i = 0; i < kv->len; i++) {
    QpKvPair *p = &g_array_index(kv, QpKvPair, i);
    guint64 lo, hi;
    if (strcmp(p->key, key) != 0)
      continue;
    if (!qp_parse_range(p->value, max, &lo, &hi))
      return qp_args_invalid(
          error,
          "%s '%s': %s '%s' is not an index or range: expected "
          "a number or a range such as 0-3, at most %" G_GUINT64_FORMAT,
          what, text, key, p->value, max);
    if (set == NULL)
      set = hwloc_bitmap_alloc();
    hwloc_bitmap_set_range(set, (unsigned)lo, (int)hi);
  }
  *out = g_steal_pointer(&set);
  return TRUE;
}

void
qp_kv_append(GString *s, const char *key, const char *value)
{
  /* A trailing run of an odd number of commas ends with a separator. */
  gsize run = 0;
  while (run < s->len && s->str[s->len - 1 - run] == ',')
    run++;
  if (s->len > 0 && run % 2 == 0)
    g_string_append_c(s, ',');
  g_string_append_printf(s, "%s=", key);
  for (const char *p = value; *p; p++) {
    if (*p == ',')
      g_string_append_c(s, ',');
    g_string_append_c(s, *p);
  }
}

void
qp_kv_append_set(GString *s, const char *key, hwloc_const_bitmap_t set)
{
  g_autofree char *list = qp_list_format(set);
  g_auto(GStrv) ranges = g_strsplit(list, ",", -1);
  for (guint i = 0; ranges[i]; i++)
    qp_kv_append(s, key, ranges[i]);
}

char *
qp_kv_without(const char *text, const char *key, const char *implied)
{
  g_autoptr(GArray) kv = qp_kv_parse(text, implied);
  GString *out = g_string_new(NULL);
  gsize klen = strlen(key);
  for (guint i = 0; i < kv->len; i++) {
    const QpKvPair *p = &g_array_index(kv, QpKvPair, i);
    /* Written as KEY=... (not a flag, nor a value of the implied key). */
    if (!p->flag && p->len > klen && strncmp(text + p->start, key, klen) == 0 &&
        text[p->start + klen] == '=')
      continue;
    if (out->len > 0)
      g_string_append_c(out, ',');
    g_string_append_len(out, text + p->start, (gssize)p->len);
  }
  return g_string_free(out, FALSE);
}
