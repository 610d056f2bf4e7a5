/* JSON values (jvalue.h): the tree, a recursive-descent reader with a depth
 * limit, and the writer. */
#include "topology/base/jvalue.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "qp-error.h"

typedef struct {
  char *key;
  QpJv *value;
} Member;

struct QpJv {
  QpJvType type;
  union {
    gboolean b;
    gint64 i;
    double d;
    char *s;
    GPtrArray *items; /* of QpJv */
    GArray *members;  /* of Member */
  } u;
};

/* ---- Values -------------------------------------------------------------- */

static QpJv *
jv_new(QpJvType t)
{
  QpJv *v = g_new0(QpJv, 1);
  v->type = t;
  return v;
}

static void
member_clear(gpointer p)
{
  Member *m = p;
  g_free(m->key);
  qp_jv_free(m->value);
}

void
qp_jv_free(QpJv *v)
{
  if (v == NULL)
    return;
  if (v->type == QP_JV_STRING)
    g_free(v->u.s);
  else if (v->type == QP_JV_ARRAY)
    g_ptr_array_unref(v->u.items);
  else if (v->type == QP_JV_OBJECT)
    g_array_unref(v->u.members);
  g_free(v);
}

QpJv *
qp_jv_null(void)
{
  return jv_new(QP_JV_NULL);
}

QpJv *
qp_jv_bool(gboolean b)
{
  QpJv *v = jv_new(QP_JV_BOOL);
  v->u.b = !!b;
  return v;
}

QpJv *
qp_jv_int(gint64 i)
{
  QpJv *v = jv_new(QP_JV_INT);
  v->u.i = i;
  return v;
}

QpJv *
qp_jv_double(double d)
{
  QpJv *v = jv_new(QP_JV_DOUBLE);
  v->u.d = d;
  return v;
}

static QpJv *
string_taken(char *s)
{
  QpJv *v = jv_new(QP_JV_STRING);
  v->u.s = s;
  return v;
}

QpJv *
qp_jv_string(const char *s)
{
  return s != NULL ? string_taken(g_strdup(s)) : qp_jv_null();
}

QpJv *
qp_jv_array(void)
{
  QpJv *v = jv_new(QP_JV_ARRAY);
  v->u.items = g_ptr_array_new_with_free_func((GDestroyNotify)qp_jv_free);
  return v;
}

QpJv *
qp_jv_object(void)
{
  QpJv *v = jv_new(QP_JV_OBJECT);
  v->u.members = g_array_new(FALSE, FALSE, sizeof(Member));
  g_array_set_clear_func(v->u.members, member_clear);
  return v;
}

QpJvType
qp_jv_type(const QpJv *v)
{
  return v != NULL ? v->type : QP_JV_NULL;
}

gboolean
qp_jv_is(const QpJv *v, QpJvType t)
{
  return v != NULL && v->type == t;
}

const char *
qp_jv_type_name(const QpJv *v)
{
  if (v == NULL)
    return "missing";
  switch (v->type) {
  case QP_JV_NULL:
    return "null";
  case QP_JV_BOOL:
    return "a boolean";
  case QP_JV_INT:
    return "an integer";
  case QP_JV_DOUBLE:
    return "a fractional or too large number";
  case QP_JV_STRING:
    return "a string";
  case QP_JV_ARRAY:
    return "an array";
  case QP_JV_OBJECT:
    return "an object";
  }
  return "unknown";
}

gboolean
qp_jv_get_bool(const QpJv *v)
{
  return qp_jv_is(v, QP_JV_BOOL) && v->u.b;
}

gint64
qp_jv_get_int(const QpJv *v)
{
  return qp_jv_is(v, QP_JV_INT) ? v->u.i : 0;
}

double
qp_jv_get_double(const QpJv *v)
{
  if (qp_jv_is(v, QP_JV_INT))
    return (double)v->u.i;
  return qp_jv_is(v, QP_JV_DOUBLE) ? v->u.d : 0.0;
}

const char *
qp_jv_get_string(const QpJv *v)
{
  return qp_jv_is(v, QP_JV_STRING) ? v->u.s : NULL;
}

guint
qp_jv_len(const QpJv *v)
{
  if (qp_jv_is(v, QP_JV_ARRAY))
    return v->u.items->len;
  return qp_jv_is(v, QP_JV_OBJECT) ? v->u.members->len : 0;
}

QpJv *
qp_jv_item(const QpJv *array, guint i)
{
  if (!qp_jv_is(array, QP_JV_ARRAY) || i >= array->u.items->len)
    return NULL;
  return array->u.items->pdata[i];
}

static Member *
member_at(const QpJv *object, guint i)
{
  if (!qp_jv_is(object, QP_JV_OBJECT) || i >= object->u.members->len)
    return NULL;
  return &g_array_index(object->u.members, Member, i);
}

const char *
qp_jv_key(const QpJv *object, guint i)
{
  Member *m = member_at(object, i);
  return m != NULL ? m->key : NULL;
}

QpJv *
qp_jv_value(const QpJv *object, guint i)
{
  Member *m = member_at(object, i);
  return m != NULL ? m->value : NULL;
}

/* KEY's index in OBJECT, or -1. */
static gssize
find(const QpJv *object, const char *key)
{
  if (!qp_jv_is(object, QP_JV_OBJECT))
    return -1;
  for (guint i = 0; i < object->u.members->len; i++)
    if (strcmp(g_array_index(object->u.members, Member, i).key, key) == 0)
      return (gssize)i;
  return -1;
}

QpJv *
qp_jv_get(const QpJv *object, const char *key)
{
  gssize i = find(object, key);
  return i >= 0 ? qp_jv_value(object, (guint)i) : NULL;
}

const char *
qp_jv_get_string_or(const QpJv *object, const char *key, const char *fallback)
{
  const char *s = qp_jv_get_string(qp_jv_get(object, key));
  return s != NULL ? s : fallback;
}

gint64
qp_jv_get_int_or(const QpJv *object, const char *key, gint64 fallback)
{
  QpJv *v = qp_jv_get(object, key);
  return qp_jv_is(v, QP_JV_INT) ? v->u.i : fallback;
}

gboolean
qp_jv_get_bool_or(const QpJv *object, const char *key, gboolean fallback)
{
  QpJv *v = qp_jv_get(object, key);
  return qp_jv_is(v, QP_JV_BOOL) ? v->u.b : fallback;
}

void
qp_jv_add(QpJv *array, QpJv *value)
{
  g_return_if_fail(qp_jv_is(array, QP_JV_ARRAY));
  g_ptr_array_add(array->u.items, value);
}

static void
append_member(QpJv *object, char *key, QpJv *value)
{
  Member m = {key, value};
  g_array_append_val(object->u.members, m);
}

void
qp_jv_set(QpJv *object, const char *key, QpJv *value)
{
  g_return_if_fail(qp_jv_is(object, QP_JV_OBJECT));
  gssize i = find(object, key);
  if (i < 0) {
    append_member(object, g_strdup(key), value);
    return;
  }
  Member *m = member_at(object, (guint)i);
  qp_jv_free(m->value);
  m->value = value;
}

gboolean
qp_jv_remove(QpJv *object, const char *key)
{
  gssize i = find(object, key);
  if (i < 0)
    return FALSE;
  g_array_remove_index(object->u.members, (guint)i);
  return TRUE;
}

QpJv *
qp_jv_take(QpJv *object, const char *key)
{
  gssize i = find(object, key);
  if (i < 0)
    return NULL;
  Member *m = member_at(object, (guint)i);
  QpJv *value = g_steal_pointer(&m->value);
  g_array_remove_index(object->u.members, (guint)i);
  return value;
}

/* ---- Reader -------------------------------------------------------------- */

typedef struct {
  const char *start;
  const char *p;
  const char *end;
  GError **error;
} Reader;

static gboolean bad(Reader *r, const char *at, const char *fmt, ...)
    G_GNUC_PRINTF(3, 4);

/* The error at AT: its line and column (in bytes, from 1). */
static gboolean
bad(Reader *r, const char *at, const char *fmt, ...)
{
  guint line = 1;
  const char *bol = r->start;
  for (const char *q = r->start; q < at; q++)
    if (*q == '\n') {
      line++;
      bol = q + 1;
    }
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *what = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(r->error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID,
              "line %u, column %u: %s", line, (guint)(at - bol) + 1, what);
  return FALSE;
}

static void
skip_space(Reader *r)
{
  while (r->p < r->end &&
         (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
    r->p++;
}

/* What is at P, for an error: the character, or the end. */
static const char *
found(Reader *r, char buf[8])
{
  if (r->p >= r->end)
    return "the end of the text";
  if ((guchar)*r->p < 0x20 || (guchar)*r->p >= 0x7f)
    g_snprintf(buf, 8, "0x%02x", (guchar)*r->p);
  else
    g_snprintf(buf, 8, "'%c'", *r->p);
  return buf;
}

static gboolean
expected(Reader *r, const char *what)
{
  char buf[8];
  return bad(r, r->p, "expected %s, found %s", what, found(r, buf));
}

static gboolean
literal(Reader *r, const char *word)
{
  gsize n = strlen(word);
  if ((gsize)(r->end - r->p) < n || memcmp(r->p, word, n) != 0)
    return expected(r, "a value");
  r->p += n;
  return TRUE;
}

static int
hex4(const char *p)
{
  int v = 0;
  for (int i = 0; i < 4; i++) {
    int d = g_ascii_xdigit_value(p[i]);
    if (d < 0)
      return -1;
    v = v * 16 + d;
  }
  return v;
}

/* \uXXXX at P (after the backslash and 'u'), a surrogate pair's second
 * half included: its code point, or -1 with the error. */
static gint32
read_unicode(Reader *r)
{
  const char *at = r->p - 2;
  if (r->end - r->p < 4 || hex4(r->p) < 0)
    return bad(r, at, "expected four hex digits after \\u"), -1;
  gint32 c = hex4(r->p);
  r->p += 4;
  if (c >= 0xdc00 && c <= 0xdfff)
    return bad(r, at, "lone low surrogate \\u%04x", (guint)c), -1;
  if (c >= 0xd800 && c <= 0xdbff) {
    if (r->end - r->p < 6 || r->p[0] != '\\' || r->p[1] != 'u' ||
        hex4(r->p + 2) < 0xdc00 || hex4(r->p + 2) > 0xdfff)
      return bad(r, at, "high surrogate \\u%04x without its low half",
                 (guint)c),
             -1;
    c = 0x10000 + ((c - 0xd800) << 10) + (hex4(r->p + 2) - 0xdc00);
    r->p += 6;
  }
  if (c == 0)
    return bad(r, at, "\\u0000 in a string; expected no NUL character"), -1;
  return c;
}

/* A string at P (at its '"'): its text, or NULL with the error. */
static char *
read_string(Reader *r)
{
  const char *open = r->p++;
  GString *s = g_string_new(NULL);
  for (;;) {
    const char *run = r->p;
    while (r->p < r->end && *r->p != '"' && *r->p != '\\' &&
           (guchar)*r->p >= 0x20)
      r->p++;
    g_string_append_len(s, run, r->p - run);
    if (r->p >= r->end) {
      bad(r, open, "string not closed");
      break;
    }
    if (*r->p == '"') {
      r->p++;
      return g_string_free(s, FALSE);
    }
    if (*r->p != '\\') {
      bad(r, r->p,
          "control character 0x%02x in a string; expected it "
          "escaped",
          (guchar)*r->p);
      break;
    }
    if (r->end - r->p < 2) {
      bad(r, open, "string not closed");
      break;
    }
    char e = r->p[1];
    r->p += 2;
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *k = e != '\0' ? strchr(from, e) : NULL;
    if (k != NULL) {
      g_string_append_c(s, to[k - from]);
      continue;
    }
    if (e != 'u') {
      bad(r, r->p - 2,
          "bad escape \\%c; expected one of \\\" \\\\ \\/ \\b \\f \\n "
          "\\r \\t \\uXXXX",
          g_ascii_isprint(e) ? e : '?');
      break;
    }
    gint32 c = read_unicode(r);
    if (c < 0)
      break;
    g_string_append_unichar(s, (gunichar)c);
  }
  g_string_free(s, TRUE);
  return NULL;
}

static gboolean
digits(Reader *r)
{
  const char *from = r->p;
  while (r->p < r->end && g_ascii_isdigit(*r->p))
    r->p++;
  return r->p > from;
}

static QpJv *
read_number(Reader *r)
{
  const char *from = r->p;
  gboolean integer = TRUE;
  if (*r->p == '-')
    r->p++;
  if (r->p < r->end && *r->p == '0')
    r->p++;
  else if (!digits(r))
    return expected(r, "a digit"), NULL;
  if (r->p < r->end && *r->p == '.') {
    r->p++;
    integer = FALSE;
    if (!digits(r))
      return expected(r, "a digit after '.'"), NULL;
  }
  if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
    r->p++;
    integer = FALSE;
    if (r->p < r->end && (*r->p == '+' || *r->p == '-'))
      r->p++;
    if (!digits(r))
      return expected(r, "a digit in the exponent"), NULL;
  }
  g_autofree char *text = g_strndup(from, (gsize)(r->p - from));
  if (integer) {
    errno = 0;
    char *rest;
    gint64 i = g_ascii_strtoll(text, &rest, 10);
    if (errno == 0 && *rest == '\0')
      return qp_jv_int(i);
  }
  double d = g_ascii_strtod(text, NULL);
  if (!isfinite(d))
    return bad(r, from, "number %.40s is out of range", text), NULL;
  return qp_jv_double(d);
}

static QpJv *read_value(Reader *r, guint depth);

static QpJv *
read_array(Reader *r, guint depth)
{
  g_autoptr(QpJv) a = qp_jv_array();
  r->p++;
  skip_space(r);
  if (r->p < r->end && *r->p == ']') {
    r->p++;
    return g_steal_pointer(&a);
  }
  for (;;) {
    QpJv *item = read_value(r, depth);
    if (item == NULL)
      return NULL;
    qp_jv_add(a, item);
    skip_space(r);
    if (r->p < r->end && *r->p == ']') {
      r->p++;
      return g_steal_pointer(&a);
    }
    if (r->p >= r->end || *r->p != ',')
      return expected(r, "',' or ']'"), NULL;
    r->p++;
  }
}

/* Objects with more members than this find a name given twice by a hash
 * table, smaller ones by a look at each. */
#define FEW_MEMBERS 16

static QpJv *
read_object(Reader *r, guint depth)
{
  g_autoptr(QpJv) o = qp_jv_object();
  g_autoptr(GHashTable) seen = NULL;
  r->p++;
  skip_space(r);
  if (r->p < r->end && *r->p == '}') {
    r->p++;
    return g_steal_pointer(&o);
  }
  for (;;) {
    skip_space(r);
    if (r->p >= r->end || *r->p != '"')
      return expected(r, "a member name in quotes"), NULL;
    const char *at = r->p;
    char *key = read_string(r);
    if (key == NULL)
      return NULL;
    guint n = o->u.members->len;
    if (n == FEW_MEMBERS) {
      seen = g_hash_table_new(g_str_hash, g_str_equal);
      for (guint i = 0; i < n; i++)
        g_hash_table_add(seen, g_array_index(o->u.members, Member, i).key);
    }
    if (seen != NULL ? g_hash_table_contains(seen, key) : find(o, key) >= 0) {
      bad(r, at, "member \"%.40s\" given twice; expected each name once", key);
      g_free(key);
      return NULL;
    }
    skip_space(r);
    if (r->p >= r->end || *r->p != ':') {
      g_free(key);
      return expected(r, "':'"), NULL;
    }
    r->p++;
    QpJv *value = read_value(r, depth);
    if (value == NULL) {
      g_free(key);
      return NULL;
    }
    append_member(o, key, value);
    if (seen != NULL)
      g_hash_table_add(seen, key);
    skip_space(r);
    if (r->p < r->end && *r->p == '}') {
      r->p++;
      return g_steal_pointer(&o);
    }
    if (r->p >= r->end || *r->p != ',')
      return expected(r, "',' or '}'"), NULL;
    r->p++;
  }
}

static QpJv *
read_value(Reader *r, guint depth)
{
  skip_space(r);
  if (r->p >= r->end)
    return expected(r, "a value"), NULL;
  switch (*r->p) {
  case '{':
  case '[':
    if (depth >= QP_JV_MAX_DEPTH)
      return bad(r, r->p, "nested deeper than %u levels", QP_JV_MAX_DEPTH),
             NULL;
    return *r->p == '{' ? read_object(r, depth + 1) : read_array(r, depth + 1);
  case '"': {
    char *s = read_string(r);
    return s != NULL ? string_taken(s) : NULL;
  }
  case 't':
    return literal(r, "true") ? qp_jv_bool(TRUE) : NULL;
  case 'f':
    return literal(r, "false") ? qp_jv_bool(FALSE) : NULL;
  case 'n':
    return literal(r, "null") ? qp_jv_null() : NULL;
  default:
    if (*r->p == '-' || g_ascii_isdigit(*r->p))
      return read_number(r);
    return expected(r, "a value"), NULL;
  }
}

QpJv *
qp_jv_parse(const char *text, gssize len, GError **error)
{
  gsize n = len < 0 ? strlen(text) : (gsize)len;
  Reader r = {text, text, text + n, error};
  if (n > QP_JV_MAX_SIZE) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID,
                "%" G_GSIZE_FORMAT " bytes; expected at most %u", n,
                QP_JV_MAX_SIZE);
    return NULL;
  }
  const char *invalid;
  if (!g_utf8_validate(text, (gssize)n, &invalid)) {
    bad(&r, invalid, "byte 0x%02x is not UTF-8 text", (guchar)*invalid);
    return NULL;
  }
  g_autoptr(QpJv) v = read_value(&r, 0);
  if (v == NULL)
    return NULL;
  skip_space(&r);
  if (r.p < r.end) {
    expected(&r, "the end of the text after the value");
    return NULL;
  }
  return g_steal_pointer(&v);
}

/* ---- Writer -------------------------------------------------------------- */

static void
write_string(GString *s, const char *text)
{
  /* JSON is UTF-8, and the reader refuses anything else: a text that is
   * not (a file name of the caller's, a device's words made of it) is
   * written with U+FFFD for each bad byte, as a -name is, so that nothing
   * qemu-pin writes (a record, plan --json, status --json) is refused by a
   * reader, its own included. */
  g_autofree char *valid =
      g_utf8_validate(text, -1, NULL) ? NULL : g_utf8_make_valid(text, -1);
  if (valid != NULL)
    text = valid;
  g_string_append_c(s, '"');
  for (const char *p = text; *p; p++) {
    guchar c = (guchar)*p;
    switch (c) {
    case '"':
      g_string_append(s, "\\\"");
      break;
    case '\\':
      g_string_append(s, "\\\\");
      break;
    case '\b':
      g_string_append(s, "\\b");
      break;
    case '\f':
      g_string_append(s, "\\f");
      break;
    case '\n':
      g_string_append(s, "\\n");
      break;
    case '\r':
      g_string_append(s, "\\r");
      break;
    case '\t':
      g_string_append(s, "\\t");
      break;
    default:
      if (c < 0x20)
        g_string_append_printf(s, "\\u%04x", c);
      else
        g_string_append_c(s, (char)c);
    }
  }
  g_string_append_c(s, '"');
}

static void
write_double(GString *s, double d)
{
  if (!isfinite(d)) {
    g_string_append(s, "null");
    return;
  }
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  g_ascii_dtostr(buf, sizeof(buf), d);
  g_string_append(s, buf);
  if (strpbrk(buf, ".eE") == NULL)
    g_string_append(s, ".0");
}

static void
indent(GString *s, gboolean pretty, guint level)
{
  if (!pretty)
    return;
  g_string_append_c(s, '\n');
  for (guint i = 0; i < level; i++)
    g_string_append(s, "  ");
}

static void
write_value(GString *s, const QpJv *v, gboolean pretty, guint level)
{
  switch (qp_jv_type(v)) {
  case QP_JV_NULL:
    g_string_append(s, "null");
    return;
  case QP_JV_BOOL:
    g_string_append(s, v->u.b ? "true" : "false");
    return;
  case QP_JV_INT:
    g_string_append_printf(s, "%" G_GINT64_FORMAT, v->u.i);
    return;
  case QP_JV_DOUBLE:
    write_double(s, v->u.d);
    return;
  case QP_JV_STRING:
    write_string(s, v->u.s);
    return;
  case QP_JV_ARRAY:
  case QP_JV_OBJECT:
    break;
  }
  gboolean object = v->type == QP_JV_OBJECT;
  guint n = qp_jv_len(v);
  g_string_append_c(s, object ? '{' : '[');
  for (guint i = 0; i < n; i++) {
    if (i > 0)
      g_string_append_c(s, ',');
    indent(s, pretty, level + 1);
    if (object) {
      write_string(s, qp_jv_key(v, i));
      g_string_append(s, pretty ? " : " : ":");
    }
    write_value(s, object ? qp_jv_value(v, i) : qp_jv_item(v, i), pretty,
                level + 1);
  }
  if (n > 0)
    indent(s, pretty, level);
  g_string_append_c(s, object ? '}' : ']');
}

void
qp_jv_write_to(GString *s, const QpJv *v, gboolean pretty)
{
  write_value(s, v, pretty, 0);
}

char *
qp_jv_write(const QpJv *v, gboolean pretty)
{
  GString *s = g_string_new(NULL);
  qp_jv_write_to(s, v, pretty);
  return g_string_free(s, FALSE);
}
