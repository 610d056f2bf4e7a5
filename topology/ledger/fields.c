/* How each kind of a record's fields is written and read, in the record
 * file's JSON and in the summary's line (see fields.h); each value read is
 * checked by the same code whichever form it came from. */
#include "topology/ledger/fields.h"

#include <limits.h>
#include <string.h>

#include "topology/base/cpulist.h"
#include "topology/ledger/record.h"

#define RECORD_VERSION 1
#define ID_MAX_LEN 128

gboolean
qp_claim_id_is_valid(const char *id)
{
  if (id == NULL || *id == '\0' || *id == '.' || strlen(id) > ID_MAX_LEN)
    return FALSE;
  for (const char *p = id; *p; p++)
    if (!g_ascii_isalnum(*p) && *p != '-' && *p != '_' && *p != '.')
      return FALSE;
  return TRUE;
}

/* ---- The checks, whichever form a value comes from ----------------------- */

static gboolean bad_field(GError **error, const char *field, const char *fmt,
                          ...) G_GNUC_PRINTF(3, 4);

static gboolean
bad_field(GError **error, const char *field, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *what = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID,
              "ledger record field \"%s\" %s", field, what);
  return FALSE;
}

/* V, the value of FIELD, is at most MAX. */
static gboolean
check_max(const char *field, guint64 v, guint64 max, GError **error)
{
  if (v > max)
    return bad_field(error, field,
                     "is %" G_GUINT64_FORMAT
                     "; expected at most %" G_GUINT64_FORMAT,
                     v, max);
  return TRUE;
}

static gboolean
check_version(guint64 v, GError **error)
{
  if (v != RECORD_VERSION)
    return bad_field(error, "version",
                     "is %" G_GUINT64_FORMAT "; expected %d (written by "
                     "another qemu-pin version?)",
                     v, RECORD_VERSION);
  return TRUE;
}

static gboolean
check_id(const char *id, gpointer out, GError **error)
{
  if (!qp_claim_id_is_valid(id))
    return bad_field(error, "id",
                     "is \"%s\"; expected letters, digits, '-', '_' or '.' "
                     "(not leading)",
                     id);
  *(char **)out = g_strdup(id);
  return TRUE;
}

static gboolean
check_mode(const char *text, gpointer out, GError **error)
{
  if (!qp_mode_parse(text, out))
    return bad_field(error, "mode",
                     "is \"%s\"; expected none, balanced, numa or one-to-one",
                     text);
  return TRUE;
}

/* KEY names a node in FIELD: digits without a leading zero, at most
 * QP_LIST_MAX_INDEX. */
static gboolean
check_node_key(const char *key, const char *field, int *out, GError **error)
{
  guint64 v = 0;
  const char *p = key;
  if (*p == '\0')
    return bad_field(error, field, "has an empty key; expected node numbers");
  for (; *p; p++) {
    if (!g_ascii_isdigit(*p) || (p == key + 1 && key[0] == '0'))
      return bad_field(error, field, "has key \"%s\"; expected a node number",
                       key);
    v = v * 10 + (guint64)(*p - '0');
    if (v > QP_LIST_MAX_INDEX)
      return bad_field(error, field, "has node %s; expected at most %d", key,
                       QP_LIST_MAX_INDEX);
  }
  *out = (int)v;
  return TRUE;
}

/* The CPU list TEXT of FIELD, not empty, into *OUT (a new set). */
static gboolean
check_cpu_list(const char *text, const char *field, hwloc_bitmap_t *out,
               GError **error)
{
  /* The name is made for an error only: records are read by the thousand. */
  if (qp_list_parse(text, "", QP_LIST_MAX_INDEX, out, NULL))
    return TRUE;
  g_autofree char *origin =
      g_strdup_printf("ledger record field \"%s\"", field);
  return qp_list_parse(text, origin, QP_LIST_MAX_INDEX, out, error);
}

/* The parts of a hugepage claim, with their largest values. */
static const struct {
  const char *key;
  guint64 max;
} huge_parts[] = {
    {"node", QP_LIST_MAX_INDEX},
    {"page-kib", G_MAXINT64},
    {"pages", G_MAXINT64},
};

/* ---- JSON values ----------------------------------------------------------
 */

/* "KEY": "0-3,8" (qp_list_format(): "" for an empty or NULL set) */
static void
set_list(QpJv *o, const char *key, hwloc_const_bitmap_t set)
{
  g_autofree char *text = qp_list_format(set);
  qp_jv_set(o, key, qp_jv_string(text));
}

/* The string in N, the member FIELD (NULL: missing); WHAT says what was
 * expected. */
static const char *
get_string(const QpJv *n, const char *field, const char *what, GError **error)
{
  if (!qp_jv_is(n, QP_JV_STRING)) {
    bad_field(error, field, "is %s; expected %s", qp_jv_type_name(n), what);
    return NULL;
  }
  return qp_jv_get_string(n);
}

/* A non-negative integer <= MAX in node N, FIELD names it in errors. */
static gboolean
get_uint(const QpJv *n, const char *field, guint64 max, guint64 *out,
         GError **error)
{
  if (n == NULL)
    return bad_field(error, field,
                     "is missing; expected a non-negative "
                     "integer");
  if (!qp_jv_is(n, QP_JV_INT))
    return bad_field(error, field, "is %s; expected a non-negative integer",
                     qp_jv_type_name(n));
  gint64 v = qp_jv_get_int(n);
  if (v < 0)
    return bad_field(error, field,
                     "is %" G_GINT64_FORMAT "; expected a non-negative "
                     "integer",
                     v);
  if (!check_max(field, (guint64)v, max, error))
    return FALSE;
  *out = (guint64)v;
  return TRUE;
}

/* The elements of the array N of FIELD (NULL: missing), or NULL with an
 * error naming WHAT was expected. */
static const QpJv *
get_array(const QpJv *n, const char *field, const char *what, GError **error)
{
  if (!qp_jv_is(n, QP_JV_ARRAY)) {
    bad_field(error, field, "is %s; expected %s", qp_jv_type_name(n), what);
    return NULL;
  }
  return n;
}

/* Element I of array A of FIELD as an object (its name "FIELD[I]" in
 * *NAME), or NULL with an error. */
static const QpJv *
get_element(const QpJv *a, guint i, const char *field, char **name,
            GError **error)
{
  const QpJv *e = qp_jv_item(a, i);
  *name = g_strdup_printf("%s[%u]", field, i);
  if (!qp_jv_is(e, QP_JV_OBJECT)) {
    bad_field(error, *name, "is %s; expected an object", qp_jv_type_name(e));
    return NULL;
  }
  return e;
}

/* ---- Line tokens ----------------------------------------------------------
 */

/* A number of FIELD at most MAX, in decimal. */
static gboolean
get_number(const char *token, const char *field, guint64 max, guint64 *out,
           GError **error)
{
  /* Digits only, leading zeros allowed: what g_ascii_string_to_unsigned()
   * takes in base 10, without its strtoull's cost (records are read by the
   * thousand). */
  guint64 v;
  const char *end = token;
  if (!qp_decimal_read(&end, NULL, G_MAXUINT64, FALSE, &v) || *end != '\0')
    return bad_field(error, field, "is \"%s\"; expected a non-negative integer",
                     token);
  if (!check_max(field, v, max, error))
    return FALSE;
  *out = v;
  return TRUE;
}

/* TEXT URI-escaped (no space, no comma), or "-" for none. */
static void
put_escaped(GString *s, const char *text)
{
  g_autofree char *e = g_uri_escape_string(text, NULL, FALSE);
  g_string_append(s, e);
}

/* The text of TOKEN, which must be UTF-8 as the record file's JSON is:
 * a line gives back only what a record can hold. */
static char *
get_escaped(const char *token, const char *field, GError **error)
{
  char *text = g_uri_unescape_string(token, NULL);
  if (text == NULL)
    bad_field(error, field, "is \"%s\"; expected an escaped string", token);
  else if (!g_utf8_validate(text, -1, NULL)) {
    bad_field(error, field, "is \"%s\"; expected escaped UTF-8 text", token);
    g_clear_pointer(&text, g_free);
  }
  return text;
}

/* The items of TOKEN separated by SEP: none for "-". */
static GStrv
items_of(const char *token, const char *sep)
{
  if (strcmp(token, "-") == 0)
    return g_new0(char *, 1);
  return g_strsplit(token, sep, -1);
}

/* version: no storage, always RECORD_VERSION. */
static void
version_put_json(QpJv *o, const QpField *f, gconstpointer v)
{
  qp_jv_set(o, f->key, qp_jv_int(RECORD_VERSION));
}

static gboolean
version_get_json(const QpJv *n, const QpField *f, gpointer v, GError **error)
{
  guint64 version = 0;
  return get_uint(n, f->key, f->max, &version, error) &&
         check_version(version, error);
}

static void
version_put_line(GString *s, const QpField *f, gconstpointer v)
{
  g_string_append_printf(s, "%d", RECORD_VERSION);
}

static gboolean
version_get_line(const char *t, const QpField *f, gpointer v, GError **error)
{
  guint64 version = 0;
  return get_number(t, f->key, f->max, &version, error) &&
         check_version(version, error);
}

const QpFieldCodec qp_field_version = {version_put_json, version_get_json,
                                       version_put_line, version_get_line};

/* A word: a value written as one string without spaces or escapes (the
 * id: char *, a valid record id; the mode: QpMode, by name). */
typedef struct {
  const QpFieldCodec *codec;
  const char *what;                     /* expected, for errors */
  const char *(*word)(gconstpointer v); /* the value as a word */
  gboolean (*set)(const char *word, gpointer v, GError **error); /* checked */
} Word;

static const char *
id_word(gconstpointer v)
{
  const char *id = *(char *const *)v;
  return id ? id : "";
}

static const char *
mode_word(gconstpointer v)
{
  return qp_mode_name(*(const QpMode *)v);
}

static const Word words[] = {
    {&qp_field_id, "a string", id_word, check_id},
    {&qp_field_mode, "a mode name", mode_word, check_mode},
};

static const Word *
word_of(const QpField *f)
{
  for (guint i = 0; i < G_N_ELEMENTS(words); i++)
    if (words[i].codec == f->codec)
      return &words[i];
  g_assert_not_reached();
}

static void
word_put_json(QpJv *o, const QpField *f, gconstpointer v)
{
  qp_jv_set(o, f->key, qp_jv_string(word_of(f)->word(v)));
}

static gboolean
word_get_json(const QpJv *n, const QpField *f, gpointer v, GError **error)
{
  const Word *w = word_of(f);
  const char *text = get_string(n, f->key, w->what, error);
  return text != NULL && w->set(text, v, error);
}

static void
word_put_line(GString *s, const QpField *f, gconstpointer v)
{
  g_string_append(s, word_of(f)->word(v));
}

static gboolean
word_get_line(const char *t, const QpField *f, gpointer v, GError **error)
{
  return word_of(f)->set(t, v, error);
}

const QpFieldCodec qp_field_id = {word_put_json, word_get_json, word_put_line,
                                  word_get_line};
const QpFieldCodec qp_field_mode = {word_put_json, word_get_json, word_put_line,
                                    word_get_line};

/* A text: char *, NULL for none (null in JSON, "-" in a line, else "=" and
 * the text escaped). */
static void
text_put_json(QpJv *o, const QpField *f, gconstpointer v)
{
  const char *text = *(char *const *)v;
  if (text != NULL || !(f->flags & QP_FIELD_OMIT))
    qp_jv_set(o, f->key, qp_jv_string(text));
}

static gboolean
text_get_json(const QpJv *n, const QpField *f, gpointer v, GError **error)
{
  if (n == NULL || qp_jv_is(n, QP_JV_NULL))
    return TRUE;
  if (!qp_jv_is(n, QP_JV_STRING))
    return bad_field(error, f->key, "is %s; expected a string or null",
                     qp_jv_type_name(n));
  *(char **)v = g_strdup(qp_jv_get_string(n));
  return TRUE;
}

static void
text_put_line(GString *s, const QpField *f, gconstpointer v)
{
  const char *text = *(char *const *)v;
  if (text == NULL) {
    g_string_append_c(s, '-');
    return;
  }
  g_string_append_c(s, '=');
  put_escaped(s, text);
}

static gboolean
text_get_line(const char *t, const QpField *f, gpointer v, GError **error)
{
  if (strcmp(t, "-") == 0)
    return TRUE;
  if (t[0] != '=')
    return bad_field(error, f->key, "is \"%s\"; expected - or =TEXT", t);
  return (*(char **)v = get_escaped(t + 1, f->key, error)) != NULL;
}

const QpFieldCodec qp_field_text = {text_put_json, text_get_json, text_put_line,
                                    text_get_line};

/* A number: int (QP_FIELD_INT) or 64 bits, at most f->max. */
static guint64
number_of(const QpField *f, gconstpointer v)
{
  return (f->flags & QP_FIELD_INT) ? (guint64)(gint64) * (const int *)v
                                   : *(const guint64 *)v;
}

static void
number_set(const QpField *f, gpointer v, guint64 n)
{
  if (f->flags & QP_FIELD_INT)
    *(int *)v = (int)n;
  else
    *(guint64 *)v = n;
}

static void
number_put_json(QpJv *o, const QpField *f, gconstpointer v)
{
  if ((f->flags & QP_FIELD_OMIT) && number_of(f, v) == 0)
    return;
  qp_jv_set(o, f->key, qp_jv_int((gint64)number_of(f, v)));
}

/* QP_FIELD_OPTIONAL: absent reads as 0 (records written before the field
 * was). */
static gboolean
number_get_json(const QpJv *n, const QpField *f, gpointer v, GError **error)
{
  guint64 x = 0;
  if (n == NULL && (f->flags & QP_FIELD_OPTIONAL)) {
    number_set(f, v, 0);
    return TRUE;
  }
  if (!get_uint(n, f->key, f->max, &x, error))
    return FALSE;
  number_set(f, v, x);
  return TRUE;
}

static void
number_put_line(GString *s, const QpField *f, gconstpointer v)
{
  g_string_append_printf(s, "%" G_GINT64_FORMAT, (gint64)number_of(f, v));
}

static gboolean
number_get_line(const char *t, const QpField *f, gpointer v, GError **error)
{
  guint64 x = 0;
  if (!get_number(t, f->key, f->max, &x, error))
    return FALSE;
  number_set(f, v, x);
  return TRUE;
}

const QpFieldCodec qp_field_number = {number_put_json, number_get_json,
                                      number_put_line, number_get_line};

/* A flag: gboolean, FALSE when absent (QP_FIELD_OMIT: not written when
 * FALSE); 0 or 1 in a line. */
static void
flag_put_json(QpJv *o, const QpField *f, gconstpointer v)
{
  if ((f->flags & QP_FIELD_OMIT) && !*(const gboolean *)v)
    return;
  qp_jv_set(o, f->key, qp_jv_bool(*(const gboolean *)v));
}

static gboolean
flag_get_json(const QpJv *n, const QpField *f, gpointer v, GError **error)
{
  if (n == NULL)
    return TRUE;
  if (!qp_jv_is(n, QP_JV_BOOL))
    return bad_field(error, f->key, "is %s; expected true or false",
                     qp_jv_type_name(n));
  *(gboolean *)v = qp_jv_get_bool(n);
  return TRUE;
}

static void
flag_put_line(GString *s, const QpField *f, gconstpointer v)
{
  g_string_append_c(s, *(const gboolean *)v ? '1' : '0');
}

static gboolean
flag_get_line(const char *t, const QpField *f, gpointer v, GError **error)
{
  if (strcmp(t, "0") != 0 && strcmp(t, "1") != 0)
    return bad_field(error, f->key, "is \"%s\"; expected 0 or 1", t);
  *(gboolean *)v = t[0] == '1';
  return TRUE;
}

const QpFieldCodec qp_field_flag = {flag_put_json, flag_get_json, flag_put_line,
                                    flag_get_line};

/* A node map: GArray of QpNodeAmount (MiB per node) or, with
 * QP_FIELD_PER_VCPUS, of QpNodeLoad (shared vCPUs per node); {"node": value} in
 * JSON, "node:value,..." in a line. */
static void
node_value_at(const QpField *f, const GArray *a, guint i, int *node, guint64 *v)
{
  if (f->flags & QP_FIELD_PER_VCPUS) {
    const QpNodeLoad *l = &g_array_index(a, QpNodeLoad, i);
    *node = l->node;
    *v = l->vcpus;
  } else {
    const QpNodeAmount *m = &g_array_index(a, QpNodeAmount, i);
    *node = m->node;
    *v = m->mib;
  }
}

static void
node_value_add(const QpField *f, GArray *a, int node, guint64 v)
{
  if (f->flags & QP_FIELD_PER_VCPUS) {
    QpNodeLoad l = {.node = node, .vcpus = (guint)v};
    g_array_append_val(a, l);
  } else {
    QpNodeAmount m = {.node = node, .mib = v};
    g_array_append_val(a, m);
  }
}

static void
node_map_put_json(QpJv *o, const QpField *f, gconstpointer v)
{
  const GArray *a = *(GArray *const *)v;
  if ((f->flags & QP_FIELD_OMIT) && (a == NULL || a->len == 0))
    return;
  QpJv *m = qp_jv_object();
  for (guint i = 0; a != NULL && i < a->len; i++) {
    int node;
    guint64 x = 0;
    node_value_at(f, a, i, &node, &x);
    char key[16];
    g_snprintf(key, sizeof key, "%d", node);
    qp_jv_set(m, key, qp_jv_int((gint64)x));
  }
  qp_jv_set(o, f->key, m);
}

static gboolean
node_map_get_json(const QpJv *n, const QpField *f, gpointer v, GError **error)
{
  if (n == NULL && (f->flags & QP_FIELD_OPTIONAL))
    return TRUE;
  if (!qp_jv_is(n, QP_JV_OBJECT))
    return bad_field(error, f->key, "is %s; expected an object of node numbers",
                     qp_jv_type_name(n));
  for (guint i = 0; i < qp_jv_len(n); i++) {
    const char *key = qp_jv_key(n, i);
    int node = 0;
    guint64 x = 0;
    g_autofree char *sub = g_strdup_printf("%s\" node \"%s", f->key, key);
    if (!check_node_key(key, f->key, &node, error) ||
        !get_uint(qp_jv_value(n, i), sub, f->max, &x, error))
      return FALSE;
    node_value_add(f, *(GArray **)v, node, x);
  }
  return TRUE;
}

static void
node_map_put_line(GString *s, const QpField *f, gconstpointer v)
{
  const GArray *a = *(GArray *const *)v;
  if (a == NULL || a->len == 0)
    g_string_append_c(s, '-');
  for (guint i = 0; a != NULL && i < a->len; i++) {
    int node;
    guint64 x = 0;
    node_value_at(f, a, i, &node, &x);
    g_string_append_printf(s, "%s%d:%" G_GUINT64_FORMAT, i ? "," : "", node, x);
  }
}

/* One "node:value" ITEM of node map F (written in: it is a copy). */
static gboolean
node_map_item(char *item, const QpField *f, GArray *a, GError **error)
{
  char *colon = strchr(item, ':');
  int node = 0;
  guint64 x = 0;
  if (colon == NULL)
    return bad_field(error, f->key, "has \"%s\"; expected node:value", item);
  *colon = '\0';
  if (!check_node_key(item, f->key, &node, error))
    return FALSE;
  if (!get_number(colon + 1, f->key, f->max, &x, NULL)) {
    /* The name is made for an error only. */
    char sub[128];
    g_snprintf(sub, sizeof sub, "%s\" node \"%s", f->key, item);
    return get_number(colon + 1, sub, f->max, &x, error);
  }
  node_value_add(f, a, node, x);
  return TRUE;
}

static gboolean
node_map_get_line(const char *t, const QpField *f, gpointer v, GError **error)
{
  /* "-" and "" (as g_strsplit() made it) hold no item. */
  if (*t == '\0' || strcmp(t, "-") == 0)
    return TRUE;
  /* One copy, its items cut in place. */
  g_autofree char *copy = g_strdup(t);
  for (char *item = copy;;) {
    char *end = strchrnul(item, ',');
    gboolean last = *end == '\0';
    *end = '\0';
    if (!node_map_item(item, f, *(GArray **)v, error))
      return FALSE;
    if (last)
      return TRUE;
    item = end + 1;
  }
}

const QpFieldCodec qp_field_node_map = {node_map_put_json, node_map_get_json,
                                        node_map_put_line, node_map_get_line};

/* CPUs: hwloc_bitmap_t; a list, "" in JSON and "-" in a line for none. */
static void
cpus_put_json(QpJv *o, const QpField *f, gconstpointer v)
{
  hwloc_const_bitmap_t set = *(const hwloc_const_bitmap_t *)v;
  if ((f->flags & QP_FIELD_OMIT) && hwloc_bitmap_iszero(set))
    return;
  set_list(o, f->key, set);
}

static gboolean
cpus_set(const char *text, const QpField *f, gpointer v, GError **error)
{
  g_auto(hwloc_bitmap_t) set = NULL;
  if (!check_cpu_list(text, f->key, &set, error))
    return FALSE;
  hwloc_bitmap_copy(*(hwloc_bitmap_t *)v, set);
  return TRUE;
}

static gboolean
cpus_get_json(const QpJv *n, const QpField *f, gpointer v, GError **error)
{
  if (n == NULL && (f->flags & QP_FIELD_OPTIONAL))
    return TRUE;
  const char *cpus = get_string(n, f->key, "a CPU list string", error);
  if (cpus == NULL)
    return FALSE;
  return *cpus == '\0' || cpus_set(cpus, f, v, error);
}

static void
cpus_put_line(GString *s, const QpField *f, gconstpointer v)
{
  hwloc_const_bitmap_t set = *(const hwloc_const_bitmap_t *)v;
  if (set == NULL || hwloc_bitmap_iszero(set)) {
    g_string_append_c(s, '-');
    return;
  }
  g_autofree char *text = qp_list_format(set);
  g_string_append(s, text);
}

static gboolean
cpus_get_line(const char *t, const QpField *f, gpointer v, GError **error)
{
  return strcmp(t, "-") == 0 || cpus_set(t, f, v, error);
}

const QpFieldCodec qp_field_cpus = {cpus_put_json, cpus_get_json, cpus_put_line,
                                    cpus_get_line};

/* Items: a GArray of items; an array of objects in JSON, the items joined
 * by SEP in a line ("-" for none). hugepages: QpHugeClaim, {"node",
 * "page-kib", "pages"}, "node:kib:pages"; cpu-load: QpCpuLoad, may be
 * absent (records written before it have only the per-node load), {"cpus",
 * "vcpus"}, "vcpus@cpus". Item I of field F is named "F[I]" in errors. */
typedef struct {
  const QpFieldCodec *codec;
  const char *sep;
  void (*put_json)(QpJv *o, gconstpointer item);
  gboolean (*get_json)(const QpJv *o, const char *name, GArray *a,
                       GError **error);
  void (*put_line)(GString *s, gconstpointer item);
  gboolean (*get_line)(char *text, const char *name, GArray *a, GError **error);
} Items;

static void
huge_item_put_json(QpJv *o, gconstpointer item)
{
  const QpHugeClaim *h = item;
  qp_jv_set(o, huge_parts[0].key, qp_jv_int(h->node));
  qp_jv_set(o, huge_parts[1].key, qp_jv_int((gint64)h->page_kib));
  qp_jv_set(o, huge_parts[2].key, qp_jv_int((gint64)h->pages));
}

/* The parts of hugepage claim NAME, each at most its bound, from GET (a
 * JSON object's member or a line's token), appended to A. */
static gboolean
huge_item_add(const char *name, GArray *a,
              gboolean (*get)(gconstpointer src, guint k, const char *sub,
                              guint64 max, guint64 *out, GError **error),
              gconstpointer src, GError **error)
{
  guint64 parts[G_N_ELEMENTS(huge_parts)];
  for (guint k = 0; k < G_N_ELEMENTS(huge_parts); k++) {
    char sub[160];
    g_snprintf(sub, sizeof sub, "%s.%s", name, huge_parts[k].key);
    if (!get(src, k, sub, huge_parts[k].max, &parts[k], error))
      return FALSE;
  }
  if (parts[1] == 0) {
    char f_kib[160];
    g_snprintf(f_kib, sizeof f_kib, "%s.page-kib", name);
    return bad_field(error, f_kib, "is 0; expected a page size in KiB");
  }
  QpHugeClaim h = {
      .node = (int)parts[0], .page_kib = parts[1], .pages = parts[2]};
  g_array_append_val(a, h);
  return TRUE;
}

static gboolean
huge_part_of_json(gconstpointer src, guint k, const char *sub, guint64 max,
                  guint64 *out, GError **error)
{
  return get_uint(qp_jv_get(src, huge_parts[k].key), sub, max, out, error);
}

static gboolean
huge_part_of_line(gconstpointer src, guint k, const char *sub, guint64 max,
                  guint64 *out, GError **error)
{
  return get_number(((char *const *)src)[k], sub, max, out, error);
}

static gboolean
huge_item_get_json(const QpJv *o, const char *name, GArray *a, GError **error)
{
  return huge_item_add(name, a, huge_part_of_json, o, error);
}

static void
huge_item_put_line(GString *s, gconstpointer item)
{
  const QpHugeClaim *h = item;
  g_string_append_printf(s, "%d:%" G_GUINT64_FORMAT ":%" G_GUINT64_FORMAT,
                         h->node, h->page_kib, h->pages);
}

static gboolean
huge_item_get_line(char *text, const char *name, GArray *a, GError **error)
{
  g_auto(GStrv) p = g_strsplit(text, ":", -1);
  if (g_strv_length(p) != G_N_ELEMENTS(huge_parts))
    return bad_field(error, name, "is \"%s\"; expected node:page-kib:pages",
                     text);
  return huge_item_add(name, a, huge_part_of_line, p, error);
}

static void
cpu_load_item_put_json(QpJv *o, gconstpointer item)
{
  const QpCpuLoad *l = item;
  set_list(o, "cpus", l->cpus);
  qp_jv_set(o, "vcpus", qp_jv_int(l->vcpus));
}

static gboolean
cpu_load_item_get_json(const QpJv *o, const char *name, GArray *a,
                       GError **error)
{
  g_autofree char *f_cpus = g_strdup_printf("%s.cpus", name);
  g_autofree char *f_vcpus = g_strdup_printf("%s.vcpus", name);
  const char *cpus =
      get_string(qp_jv_get(o, "cpus"), f_cpus, "a CPU list string", error);
  QpCpuLoad l = {NULL, 0};
  guint64 vcpus = 0;
  if (cpus == NULL || !check_cpu_list(cpus, f_cpus, &l.cpus, error))
    return FALSE;
  if (!get_uint(qp_jv_get(o, "vcpus"), f_vcpus, G_MAXUINT, &vcpus, error)) {
    hwloc_bitmap_free(l.cpus);
    return FALSE;
  }
  l.vcpus = (guint)vcpus;
  g_array_append_val(a, l);
  return TRUE;
}

static void
cpu_load_item_put_line(GString *s, gconstpointer item)
{
  const QpCpuLoad *l = item;
  g_autofree char *cpus = qp_list_format(l->cpus);
  g_string_append_printf(s, "%u@%s", l->vcpus, cpus);
}

static gboolean
cpu_load_item_get_line(char *text, const char *name, GArray *a, GError **error)
{
  char *at = strchr(text, '@');
  char f_cpus[128];
  g_snprintf(f_cpus, sizeof f_cpus, "%s.cpus", name);
  char f_vcpus[128];
  g_snprintf(f_vcpus, sizeof f_vcpus, "%s.vcpus", name);
  QpCpuLoad l = {NULL, 0};
  guint64 vcpus = 0;
  if (at == NULL)
    return bad_field(error, name, "is \"%s\"; expected vcpus@cpus", text);
  *at = '\0';
  if (!get_number(text, f_vcpus, G_MAXUINT, &vcpus, error) ||
      !check_cpu_list(at + 1, f_cpus, &l.cpus, error))
    return FALSE;
  l.vcpus = (guint)vcpus;
  g_array_append_val(a, l);
  return TRUE;
}

static const Items items_kinds[] = {
    {&qp_field_huge, ",", huge_item_put_json, huge_item_get_json,
     huge_item_put_line, huge_item_get_line},
    {&qp_field_cpu_load, ";", cpu_load_item_put_json, cpu_load_item_get_json,
     cpu_load_item_put_line, cpu_load_item_get_line},
};

static const Items *
items_of_field(const QpField *f)
{
  for (guint i = 0; i < G_N_ELEMENTS(items_kinds); i++)
    if (items_kinds[i].codec == f->codec)
      return &items_kinds[i];
  g_assert_not_reached();
}

static void
items_put_json(QpJv *o, const QpField *f, gconstpointer v)
{
  const Items *k = items_of_field(f);
  const GArray *a = *(GArray *const *)v;
  QpJv *list = qp_jv_array();
  for (guint i = 0; a != NULL && i < a->len; i++) {
    QpJv *item = qp_jv_object();
    k->put_json(item,
                a->data + (gsize)i * g_array_get_element_size((GArray *)a));
    qp_jv_add(list, item);
  }
  qp_jv_set(o, f->key, list);
}

static gboolean
items_get_json(const QpJv *n, const QpField *f, gpointer v, GError **error)
{
  if (n == NULL && (f->flags & QP_FIELD_OPTIONAL))
    return TRUE;
  const QpJv *a = get_array(n, f->key, "an array", error);
  for (guint i = 0; a != NULL && i < qp_jv_len(a); i++) {
    g_autofree char *name = NULL;
    const QpJv *o = get_element(a, i, f->key, &name, error);
    if (o == NULL ||
        !items_of_field(f)->get_json(o, name, *(GArray **)v, error))
      return FALSE;
  }
  return a != NULL;
}

static void
items_put_line(GString *s, const QpField *f, gconstpointer v)
{
  const Items *k = items_of_field(f);
  const GArray *a = *(GArray *const *)v;
  if (a == NULL || a->len == 0)
    g_string_append_c(s, '-');
  for (guint i = 0; a != NULL && i < a->len; i++) {
    if (i > 0)
      g_string_append(s, k->sep);
    k->put_line(s, a->data + (gsize)i * g_array_get_element_size((GArray *)a));
  }
}

static gboolean
items_get_line(const char *t, const QpField *f, gpointer v, GError **error)
{
  const Items *k = items_of_field(f);
  g_auto(GStrv) items = items_of(t, k->sep);
  for (guint i = 0; items[i] != NULL; i++) {
    char name[128];
    g_snprintf(name, sizeof name, "%s[%u]", f->key, i);
    if (!k->get_line(items[i], name, *(GArray **)v, error))
      return FALSE;
  }
  return TRUE;
}

const QpFieldCodec qp_field_huge = {items_put_json, items_get_json,
                                    items_put_line, items_get_line};
const QpFieldCodec qp_field_cpu_load = {items_put_json, items_get_json,
                                        items_put_line, items_get_line};

/* Strings: GPtrArray of char *, may be absent; an array in JSON, "=" and
 * each escaped, comma-separated, in a line ("-" for none). */
static void
strings_put_json(QpJv *o, const QpField *f, gconstpointer v)
{
  const GPtrArray *a = *(GPtrArray *const *)v;
  if (a->len == 0 && (f->flags & QP_FIELD_OMIT))
    return;
  QpJv *list = qp_jv_array();
  for (guint i = 0; i < a->len; i++)
    qp_jv_add(list, qp_jv_string(a->pdata[i]));
  qp_jv_set(o, f->key, list);
}

static gboolean
strings_get_json(const QpJv *n, const QpField *f, gpointer v, GError **error)
{
  if (n == NULL)
    return TRUE;
  const QpJv *a = get_array(n, f->key, "an array of strings", error);
  for (guint i = 0; a != NULL && i < qp_jv_len(a); i++) {
    const char *s = get_string(qp_jv_item(a, i), f->key, "a string", error);
    if (s == NULL)
      return FALSE;
    g_ptr_array_add(*(GPtrArray **)v, g_strdup(s));
  }
  return a != NULL;
}

static void
strings_put_line(GString *s, const QpField *f, gconstpointer v)
{
  const GPtrArray *a = *(GPtrArray *const *)v;
  g_string_append_c(s, a->len == 0 ? '-' : '=');
  for (guint i = 0; i < a->len; i++) {
    if (i > 0)
      g_string_append_c(s, ',');
    put_escaped(s, a->pdata[i]);
  }
}

static gboolean
strings_get_line(const char *t, const QpField *f, gpointer v, GError **error)
{
  if (strcmp(t, "-") == 0)
    return TRUE;
  if (t[0] != '=' || t[1] == '\0')
    return bad_field(error, f->key, "is \"%s\"; expected - or =TEXT,...", t);
  g_auto(GStrv) parts = g_strsplit(t + 1, ",", -1);
  for (guint i = 0; parts[i] != NULL; i++) {
    char *s = get_escaped(parts[i], f->key, error);
    if (s == NULL)
      return FALSE;
    g_ptr_array_add(*(GPtrArray **)v, s);
  }
  return TRUE;
}

const QpFieldCodec qp_field_strings = {strings_put_json, strings_get_json,
                                       strings_put_line, strings_get_line};
