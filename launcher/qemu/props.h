/* The properties of an -object or -device value, in either of QEMU's
 * syntaxes: JSON ({"qom-type":"memory-backend-ram","size":1073741824}) or
 * key=value (memory-backend-ram,size=1G). One reader serves both: a JSON
 * value is typed and checked against a schema, a key=value value is text
 * parsed as it is read. A value is edited and written back in the syntax
 * it came in, key=value as the caller wrote it with the edits appended. */
#pragma once

#include <glib.h>
#include <hwloc.h>

#include "topology/base/jvalue.h"

G_BEGIN_DECLS

typedef struct {
  const char *option; /* "-object", "-device": names the value in errors */
  const char *text;   /* the value as written */
  const char *implied;
  GArray *kv;      /* key=value: its items (of QpKvPair); else NULL */
  GString *edited; /* key=value: the text with the edits */
  QpJv *json;      /* JSON: the object; else NULL */
} QpProps;

typedef enum {
  QP_PROP_BOOL,   /* JSON true or false */
  QP_PROP_SIZE,   /* JSON non-negative integer (bytes) */
  QP_PROP_STRING, /* JSON string */
} QpPropType;

typedef struct {
  const char *key;
  QpPropType type;
} QpPropSchema;

/* Reads TEXT, a value of OPTION: JSON when it starts with '{', else
 * key=value with IMPLIED as the key of a first item written without one.
 * FALSE for JSON that does not parse or is not an object (with a one-line
 * error when ERROR is not NULL). */
gboolean qp_props_read(QpProps *p, const char *option, const char *text,
                       const char *implied, GError **error);
void qp_props_clear(QpProps *p);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(QpProps, qp_props_clear)

/* Checks the JSON members named in SCHEMA (ended by a NULL key) for their
 * types, in the order they are written; key=value passes (its values are
 * checked as they are read). */
gboolean qp_props_check(const QpProps *p, const QpPropSchema *schema,
                        GError **error);

gboolean qp_props_has(const QpProps *p, const char *key);

/* KEY's value when it is a string (JSON) or given (key=value), else NULL. */
const char *qp_props_string(const QpProps *p, const char *key);

/* The same, refused when JSON gives KEY as something else than a string. */
gboolean qp_props_get_string(const QpProps *p, const char *key,
                             const char **out, GError **error);

/* KEY as a boolean (key=value: on/off and the like), left as it is when
 * not given. */
gboolean qp_props_bool(const QpProps *p, const char *key, gboolean *out,
                       GError **error);

/* KEY as a size in bytes (key=value: "1G" and the like; JSON: an integer);
 * *GIVEN says whether it is there, *OUT is left as it is when not. */
gboolean qp_props_size(const QpProps *p, const char *key, guint64 *out,
                       gboolean *given, GError **error);

/* KEY as a set of numbers up to MAX (key=value: "host-nodes=0-1,host-nodes=3";
 * JSON: an array), NULL when not given. */
gboolean qp_props_index_set(const QpProps *p, const char *key, guint64 max,
                            hwloc_bitmap_t *out, GError **error);

/* Readers that never fail, for values QEMU itself will check: FALLBACK
 * (or 0) for a value that is missing or cannot be read. */
gboolean qp_props_bool_or(const QpProps *p, const char *key, gboolean fallback);
guint64 qp_props_uint_or_zero(const QpProps *p, const char *key);
guint64 qp_props_size_or_zero(const QpProps *p, const char *key);

/* Edits: KEY set to VALUE, or to SET (an array in JSON, one item a range in
 * key=value), or taken out. */
void qp_props_set_string(QpProps *p, const char *key, const char *value);
void qp_props_set_index_set(QpProps *p, const char *key,
                            hwloc_const_bitmap_t set);
void qp_props_remove(QpProps *p, const char *key);

/* The value with its edits, in the syntax it came in. */
char *qp_props_to_text(const QpProps *p);

G_END_DECLS
