/* topology/base/jvalue.h: qemu-pin's own JSON reader and writer, which
 * reads ledger records of writers it does not trust: every refusal is one
 * line saying where, and no input crashes it or reads past its end. */
#include "topology/base/jvalue.h"

#include <string.h>

#include "qp-error.h"

static QpJv *
parse_ok(const char *text)
{
  g_autoptr(GError) error = NULL;
  QpJv *v = qp_jv_parse(text, -1, &error);
  g_assert_no_error(error);
  g_assert_nonnull(v);
  return v;
}

/* TEXT is refused with a one-line error that contains WANT. */
static void
parse_bad_len(const char *text, gssize len, const char *want)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(QpJv) v = qp_jv_parse(text, len, &error);
  g_assert_null(v);
  g_assert_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID);
  g_assert_null(strchr(error->message, '\n'));
  if (strstr(error->message, want) == NULL)
    g_error("'%s': error \"%s\" does not say \"%s\"", text, error->message,
            want);
}

static void
parse_bad(const char *text, const char *want)
{
  parse_bad_len(text, -1, want);
}

static void
test_values(void)
{
  g_autoptr(QpJv) v = parse_ok(
      " {\"a\": null, \"b\": true, \"c\": false, \"i\": -42, \"d\": 1.5e3,"
      " \"s\": \"x\\u00e9\\ud83d\\ude00\\n\", \"arr\": [1, [], {}],"
      " \"big\": 9223372036854775807, \"small\": -9223372036854775808,"
      " \"over\": 9223372036854775808} ");
  g_assert_cmpint(qp_jv_type(v), ==, QP_JV_OBJECT);
  g_assert_cmpuint(qp_jv_len(v), ==, 10);
  /* Members in the order written. */
  g_assert_cmpstr(qp_jv_key(v, 0), ==, "a");
  g_assert_cmpstr(qp_jv_key(v, 9), ==, "over");
  g_assert_true(qp_jv_is(qp_jv_get(v, "a"), QP_JV_NULL));
  g_assert_true(qp_jv_get_bool(qp_jv_get(v, "b")));
  g_assert_false(qp_jv_get_bool(qp_jv_get(v, "c")));
  g_assert_cmpint(qp_jv_get_int(qp_jv_get(v, "i")), ==, -42);
  g_assert_true(qp_jv_is(qp_jv_get(v, "d"), QP_JV_DOUBLE));
  g_assert_cmpfloat(qp_jv_get_double(qp_jv_get(v, "d")), ==, 1500.0);
  g_assert_cmpstr(qp_jv_get_string(qp_jv_get(v, "s")), ==,
                  "x\xc3\xa9\xf0\x9f\x98\x80\n");
  QpJv *arr = qp_jv_get(v, "arr");
  g_assert_cmpuint(qp_jv_len(arr), ==, 3);
  g_assert_cmpint(qp_jv_get_int(qp_jv_item(arr, 0)), ==, 1);
  g_assert_null(qp_jv_item(arr, 3));
  g_assert_cmpint(qp_jv_get_int(qp_jv_get(v, "big")), ==, G_MAXINT64);
  g_assert_cmpint(qp_jv_get_int(qp_jv_get(v, "small")), ==, G_MININT64);
  /* Too large for 64 bits: a double, as json-glib reads it. */
  g_assert_cmpstr(qp_jv_type_name(qp_jv_get(v, "over")), ==,
                  "a fractional or too large number");
  g_assert_null(qp_jv_get(v, "nope"));
  g_assert_cmpstr(qp_jv_type_name(qp_jv_get(v, "nope")), ==, "missing");
  g_assert_cmpstr(qp_jv_get_string_or(v, "i", "dflt"), ==, "dflt");
  /* The typed getters with a fallback: the value only when of the type. */
  g_assert_cmpint(qp_jv_get_int_or(v, "i", 7), ==, -42);
  g_assert_cmpint(qp_jv_get_int_or(v, "d", 7), ==, 7);
  g_assert_cmpint(qp_jv_get_int_or(v, "nope", 7), ==, 7);
  g_assert_cmpint(qp_jv_get_int_or(arr, "i", 7), ==, 7);
  g_assert_true(qp_jv_get_bool_or(v, "b", FALSE));
  g_assert_false(qp_jv_get_bool_or(v, "c", TRUE));
  g_assert_true(qp_jv_get_bool_or(v, "i", TRUE));
  g_assert_false(qp_jv_get_bool_or(v, "nope", FALSE));
  /* Top-level scalars are values too (RFC 8259). */
  g_autoptr(QpJv) n = parse_ok("3");
  g_assert_cmpint(qp_jv_get_int(n), ==, 3);
}

static void
test_refused(void)
{
  parse_bad("", "line 1, column 1: expected a value, found the end");
  parse_bad("   \n  ", "line 2, column 3: expected a value");
  parse_bad("{\"a\":1,}", "column 8: expected a member name");
  parse_bad("[1,]", "column 4: expected a value");
  parse_bad("[1 2]", "expected ',' or ']'");
  parse_bad("{\"a\" 1}", "expected ':'");
  parse_bad("{\"a\":1} x", "column 9: expected the end of the text");
  parse_bad("{\"a\":1}{}", "expected the end of the text");
  parse_bad("nul", "expected a value");
  parse_bad("True", "expected a value");
  parse_bad("'a'", "expected a value");
  parse_bad("01", "expected the end");
  parse_bad("-", "expected a digit");
  parse_bad("1.", "expected a digit after '.'");
  parse_bad("1e", "expected a digit in the exponent");
  parse_bad("+1", "expected a value");
  parse_bad(".5", "expected a value");
  parse_bad("NaN", "expected a value");
  parse_bad("1e999", "number 1e999 is out of range");
  parse_bad("-1e400", "out of range");
  parse_bad("\"abc", "column 1: string not closed");
  parse_bad("\"a\\", "string not closed");
  parse_bad("\"a\tb\"", "control character 0x09 in a string");
  parse_bad("\"\\x\"", "bad escape \\x");
  parse_bad("\"\\u12\"", "expected four hex digits");
  parse_bad("\"\\u12g4\"", "expected four hex digits");
  parse_bad("\"\\ud800\"", "high surrogate \\ud800 without its low half");
  parse_bad("\"\\ud800\\u0041\"", "without its low half");
  parse_bad("\"\\udc00\"", "lone low surrogate");
  parse_bad("\"\\u0000\"", "NUL");
  parse_bad("\"\xff\"", "byte 0xff is not UTF-8");
  parse_bad("\"\xc3\"", "not UTF-8");
  parse_bad("\"\xed\xa0\x80\"", "not UTF-8"); /* a surrogate in UTF-8 */
  parse_bad_len("[1,\0002]", 5, "not UTF-8");
  parse_bad("{\"a\":1,\"a\":2}", "member \"a\" given twice");
  parse_bad("/* c */ 1", "expected a value");
}

/* Names given twice in an object large enough for the hash table. */
static void
test_duplicates_many(void)
{
  GString *s = g_string_new("{");
  for (int i = 0; i < 40; i++)
    g_string_append_printf(s, "\"k%d\":%d,", i, i);
  g_autofree char *ok = g_strdup_printf("%s\"last\":0}", s->str);
  g_autoptr(QpJv) v = parse_ok(ok);
  g_assert_cmpuint(qp_jv_len(v), ==, 41);
  g_assert_cmpint(qp_jv_get_int(qp_jv_get(v, "k39")), ==, 39);
  g_string_append(s, "\"k3\":0}");
  parse_bad(s->str, "member \"k3\" given twice");
  g_string_free(s, TRUE);
}

static void
test_depth(void)
{
  GString *s = g_string_new(NULL);
  for (int i = 0; i < QP_JV_MAX_DEPTH; i++)
    g_string_append(s, i % 2 ? "{\"a\":" : "[");
  g_string_append(s, "0");
  for (int i = QP_JV_MAX_DEPTH - 1; i >= 0; i--)
    g_string_append(s, i % 2 ? "}" : "]");
  g_autoptr(QpJv) v = parse_ok(s->str);
  g_assert_nonnull(v);
  g_string_free(s, TRUE);
  /* Far deeper than the limit: refused, not a stack overflow. */
  g_autofree char *deep = g_strnfill(100000, '[');
  parse_bad(deep, "nested deeper than 64 levels");
}

static void
test_size(void)
{
  gsize n = QP_JV_MAX_SIZE + 1;
  g_autofree char *big = g_malloc(n + 1);
  memset(big, ' ', n);
  big[0] = '1';
  big[n] = '\0';
  parse_bad(big, "expected at most");
}

/* Every prefix of a valid text is refused (or is a shorter valid number),
 * and reading never goes past the length it is given. */
static void
test_truncated(void)
{
  const char *text = "{\"id\":\"vm-1\",\"n\":[1,2.5e-3,true,null],"
                     "\"s\":\"\\u00e9\\ud83d\\ude00\",\"o\":{\"x\":{}}}";
  gsize n = strlen(text);
  for (gsize len = 0; len < n; len++) {
    /* A copy of exactly LEN bytes: a read past it is ASan's to catch. */
    g_autofree char *part = g_memdup2(text, len);
    g_autoptr(GError) error = NULL;
    g_autoptr(QpJv) v = qp_jv_parse(part ? part : "", (gssize)len, &error);
    g_assert_null(v);
    g_assert_nonnull(error);
    g_assert_null(strchr(error->message, '\n'));
  }
  g_autoptr(QpJv) whole = parse_ok(text);
  g_assert_nonnull(whole);
}

/* Bytes flipped at random in a valid text: every result is a value or a
 * one-line error. */
static void
test_mutations(void)
{
  const char *text = "{\"version\":1,\"id\":\"a\",\"mem\":{\"0\":1024},"
                     "\"cpus\":\"0-1\",\"strings\":[\"x\\\"y\"]}";
  gsize n = strlen(text);
  GRand *rand = g_rand_new_with_seed(28);
  static const char alphabet[] = "{}[]\":,\\u0123456789eE+-.tfn \x80\xff";
  for (guint round = 0; round < 20000; round++) {
    g_autofree char *t = g_memdup2(text, n);
    guint flips = (guint)g_rand_int_range(rand, 1, 4);
    for (guint k = 0; k < flips; k++)
      t[g_rand_int_range(rand, 0, (gint32)n)] =
          alphabet[g_rand_int_range(rand, 0, sizeof(alphabet) - 1)];
    g_autoptr(GError) error = NULL;
    g_autoptr(QpJv) v = qp_jv_parse(t, (gssize)n, &error);
    g_assert_true((v == NULL) != (error == NULL));
    if (error != NULL)
      g_assert_null(strchr(error->message, '\n'));
  }
  g_rand_free(rand);
}

static void
test_write(void)
{
  g_autoptr(QpJv) o = qp_jv_object();
  qp_jv_set(o, "version", qp_jv_int(1));
  qp_jv_set(o, "name", qp_jv_string("a \"b\"\\\n\x01\xc3\xa9/"));
  qp_jv_set(o, "none", qp_jv_string(NULL));
  QpJv *a = qp_jv_array();
  qp_jv_add(a, qp_jv_bool(TRUE));
  qp_jv_add(a, qp_jv_double(0.25));
  qp_jv_add(a, qp_jv_double(2.0));
  qp_jv_set(o, "list", a);
  qp_jv_set(o, "empty", qp_jv_object());
  qp_jv_set(o, "nothing", qp_jv_array());
  g_autofree char *compact = qp_jv_write(o, FALSE);
  g_assert_cmpstr(compact, ==,
                  "{\"version\":1,\"name\":\"a \\\"b\\\"\\\\\\n\\u0001\xc3\xa9/"
                  "\",\"none\":null,\"list\":[true,0.25,2.0],\"empty\":{},"
                  "\"nothing\":[]}");
  g_autofree char *pretty = qp_jv_write(o, TRUE);
  g_assert_cmpstr(pretty, ==,
                  "{\n  \"version\" : 1,\n  \"name\" : \"a \\\"b\\\"\\\\\\n"
                  "\\u0001\xc3\xa9/\",\n  \"none\" : null,\n  \"list\" : [\n"
                  "    true,\n    0.25,\n    2.0\n  ],\n  \"empty\" : {},\n"
                  "  \"nothing\" : []\n}");
  /* A text that is not UTF-8 (a file name's bytes) is written with U+FFFD
   * for each bad byte: what is written is JSON the reader takes. */
  g_autoptr(QpJv) bytes = qp_jv_object();
  qp_jv_set(bytes, "path", qp_jv_string("/tmp/d\xff\xc3.img \xc3\xa9"));
  g_autofree char *bytes_text = qp_jv_write(bytes, FALSE);
  g_assert_cmpstr(bytes_text, ==,
                  "{\"path\":\"/tmp/d\xef\xbf\xbd\xef\xbf\xbd.img \xc3\xa9\"}");
  g_autoptr(QpJv) bytes_back = parse_ok(bytes_text);
  g_assert_cmpstr(qp_jv_get_string(qp_jv_get(bytes_back, "path")), ==,
                  "/tmp/d\xef\xbf\xbd\xef\xbf\xbd.img \xc3\xa9");
  /* What is written reads back the same. */
  g_autoptr(QpJv) back = parse_ok(pretty);
  g_autofree char *again = qp_jv_write(back, FALSE);
  g_assert_cmpstr(again, ==, compact);
  /* Setting a member keeps its place; removing keeps the others' order. */
  qp_jv_set(o, "version", qp_jv_int(2));
  g_assert_cmpstr(qp_jv_key(o, 0), ==, "version");
  g_assert_cmpint(qp_jv_get_int(qp_jv_get(o, "version")), ==, 2);
  g_assert_true(qp_jv_remove(o, "name"));
  g_assert_false(qp_jv_remove(o, "name"));
  g_assert_cmpstr(qp_jv_key(o, 1), ==, "none");
  g_assert_cmpuint(qp_jv_len(o), ==, 5);
  /* Taking a member hands it over whole and leaves the rest in order. */
  g_autoptr(QpJv) list = qp_jv_take(o, "list");
  g_assert_cmpuint(qp_jv_len(list), ==, 3);
  g_assert_null(qp_jv_take(o, "list"));
  g_assert_cmpuint(qp_jv_len(o), ==, 4);
  g_assert_cmpstr(qp_jv_key(o, 2), ==, "empty");
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/jvalue/values", test_values);
  g_test_add_func("/jvalue/refused", test_refused);
  g_test_add_func("/jvalue/duplicates-many", test_duplicates_many);
  g_test_add_func("/jvalue/depth", test_depth);
  g_test_add_func("/jvalue/size", test_size);
  g_test_add_func("/jvalue/truncated", test_truncated);
  g_test_add_func("/jvalue/mutations", test_mutations);
  g_test_add_func("/jvalue/write", test_write);
  return g_test_run();
}
