/* QEMU's key=value option syntax (QemuOpts), items split by the front's
 * qp_kv_next() (launcher/front/qemu-argv.h): items separated by commas;
 * ",," is a literal comma inside a value; the first item may omit its key
 * (the implied key, e.g. cpus for -smp); an item without "=" elsewhere is a
 * flag: "foo" means foo=on, "nofoo" foo=off. Later keys win, except for
 * list keys (cpus of -numa node, host-nodes), which add. */
#pragma once

#include <glib.h>
#include <hwloc.h>

#include "launcher/front/qemu-argv.h"

G_BEGIN_DECLS

typedef struct {
  char *key;
  char *value;
  gboolean flag;    /* written without "=" */
  const char *text; /* the whole option value it came from */
  gsize start, len; /* where the item is written in text */
} QpKvPair;

/* An empty array of QpKvPair, to free with g_array_unref(). */
GArray *qp_kv_new(void);

/* Appends the items of TEXT to KV, IMPLIED naming the key of a first item
 * written without one. */
void qp_kv_parse_into(GArray *kv, const char *text, const char *implied);

/* The items of TEXT ("a=1,b=x,,y,flag"), IMPLIED as for qp_kv_parse_into.
 * An array to free with g_array_unref(). */
GArray *qp_kv_parse(const char *text, const char *implied);

/* The last item of KEY in KV, or NULL. */
QpKvPair *qp_kv_last(GArray *kv, const char *key);

/* The last value of KEY in KV, or NULL. */
const char *qp_kv_get(GArray *kv, const char *key);

/* Whether an item of KV is a flag asking for help ("x,help"). */
gboolean qp_kv_wants_help(GArray *kv);

/* Refuses the first key of KV not in KNOWN (NULL-terminated) as QEMU does,
 * naming OPTION, its value and the EXPECTED keys ("size, slots or
 * maxmem"). */
gboolean qp_kv_check_keys(GArray *kv, const char *const *known,
                          const char *option, const char *expected,
                          GError **error);

/* Every KEY of KV as one set ("host-nodes=0-1,host-nodes=3"), NULL when
 * there is none. WHAT and TEXT (the option and its value) name the value
 * in the error. */
gboolean qp_kv_index_set(GArray *kv, const char *key, guint64 max,
                         const char *what, const char *text,
                         hwloc_bitmap_t *out, GError **error);

/* Appends ",KEY=VALUE" to the key=value text in S, escaping commas. */
void qp_kv_append(GString *s, const char *key, const char *value);

/* Appends SET as KEY items, one a range ("host-nodes=0-1,host-nodes=3"). */
void qp_kv_append_set(GString *s, const char *key, hwloc_const_bitmap_t set);

/* TEXT (key=value syntax, IMPLIED as for qp_kv_parse_into) without its
 * KEY=... items; the others stay as they were written, ",," escapes
 * included. */
char *qp_kv_without(const char *text, const char *key, const char *implied);

G_END_DECLS
