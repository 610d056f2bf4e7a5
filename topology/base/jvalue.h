/* JSON values of qemu-pin's own: a tree read from text and written back,
 * for the launch path, which loads no json-glib (and so no GObject or GIO:
 * docs/design.md, "The front"). The reader is strict RFC 8259 for input
 * from writers we do not trust (ledger records, QEMU's command line): the
 * whole text UTF-8, one value with nothing after it, no control character
 * or lone surrogate in a string, at most QP_JV_MAX_DEPTH levels of arrays
 * and objects and QP_JV_MAX_SIZE bytes. An object that names a member twice
 * is refused. An integer that does not fit in 64 bits is read as a double,
 * as json-glib does. topology/base/json.c are json-glib's builder helpers,
 * for the views. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define QP_JV_MAX_DEPTH 64
#define QP_JV_MAX_SIZE (16u << 20)

typedef enum {
  QP_JV_NULL,
  QP_JV_BOOL,
  QP_JV_INT,
  QP_JV_DOUBLE,
  QP_JV_STRING,
  QP_JV_ARRAY,
  QP_JV_OBJECT,
} QpJvType;

typedef struct QpJv QpJv;

/* TEXT (LEN bytes, or up to its NUL when LEN < 0) read as one value; NULL
 * with a one-line error saying where ("line L, column C: ...") and what
 * was expected. */
QpJv *qp_jv_parse(const char *text, gssize len, GError **error);
void qp_jv_free(QpJv *v);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QpJv, qp_jv_free)

/* New values, owned by the caller until added to an array or object. */
QpJv *qp_jv_null(void);
QpJv *qp_jv_bool(gboolean b);
QpJv *qp_jv_int(gint64 i);
QpJv *qp_jv_double(double d);
QpJv *qp_jv_string(const char *s); /* NULL: null */
QpJv *qp_jv_array(void);
QpJv *qp_jv_object(void);

/* V's type; QP_JV_NULL for V NULL too. */
QpJvType qp_jv_type(const QpJv *v);
/* TRUE when V is not NULL and of type T. */
gboolean qp_jv_is(const QpJv *v, QpJvType t);
/* "null", "a boolean", "an integer", "a fractional or too large number",
 * "a string", "an array", "an object"; "missing" for NULL. */
const char *qp_jv_type_name(const QpJv *v);

/* V's value; FALSE, 0 or NULL when V is of another type. A double is an
 * integer's value too (qp_jv_get_double()). */
gboolean qp_jv_get_bool(const QpJv *v);
gint64 qp_jv_get_int(const QpJv *v);
double qp_jv_get_double(const QpJv *v);
const char *qp_jv_get_string(const QpJv *v);

/* Arrays' items and objects' members, in order: their number, item I,
 * member I's name and value. */
guint qp_jv_len(const QpJv *v);
QpJv *qp_jv_item(const QpJv *array, guint i);
const char *qp_jv_key(const QpJv *object, guint i);
QpJv *qp_jv_value(const QpJv *object, guint i);

/* OBJECT's member KEY, or NULL (also for OBJECT not an object). */
QpJv *qp_jv_get(const QpJv *object, const char *key);
/* Its string, or FALLBACK when it is missing or not a string; its
 * integer, or FALLBACK when it is missing or not an integer; its boolean,
 * or FALLBACK when it is missing or not a boolean. */
const char *qp_jv_get_string_or(const QpJv *object, const char *key,
                                const char *fallback);
gint64 qp_jv_get_int_or(const QpJv *object, const char *key, gint64 fallback);
gboolean qp_jv_get_bool_or(const QpJv *object, const char *key,
                           gboolean fallback);

/* Edits, which take VALUE: added to ARRAY; KEY of OBJECT set (in its place
 * when there, else last); KEY taken out (FALSE when it was not there). */
void qp_jv_add(QpJv *array, QpJv *value);
void qp_jv_set(QpJv *object, const char *key, QpJv *value);
gboolean qp_jv_remove(QpJv *object, const char *key);
/* KEY taken out of OBJECT and handed to the caller (NULL when it was not
 * there): a reply's "return" without a copy. */
QpJv *qp_jv_take(QpJv *object, const char *key);

/* V as text: PRETTY as json-glib's generator writes it with an indent of
 * 2 ("key" : value, a line each), else on one line without spaces. */
char *qp_jv_write(const QpJv *v, gboolean pretty);
void qp_jv_write_to(GString *s, const QpJv *v, gboolean pretty);

G_END_DECLS
