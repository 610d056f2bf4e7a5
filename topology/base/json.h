/* Members of a JSON object being built: the few shapes qemu-pin writes in
 * its records, plans, status and host views. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <hwloc.h>

#include "topology/base/jvalue.h"

G_BEGIN_DECLS

/* "KEY": V */
void qp_json_add_int(JsonBuilder *b, const char *key, gint64 v);
/* "KEY": "V", or null when V is NULL */
/* A string value V (not NULL), made UTF-8 as JSON must be: U+FFFD for each
 * byte that is not. */
void qp_json_add_string_value(JsonBuilder *b, const char *v);
void qp_json_add_string(JsonBuilder *b, const char *key, const char *v);
/* "KEY": "0-3,8" (qp_list_format(): "" for an empty or NULL set) */
void qp_json_add_list(JsonBuilder *b, const char *key,
                      hwloc_const_bitmap_t set);
/* The same, with null for a NULL set (a set that was not chosen). */
void qp_json_add_list_or_null(JsonBuilder *b, const char *key,
                              hwloc_const_bitmap_t set);
/* "KEY": ["line", ...] (LINES NULL: []) */
void qp_json_add_strings(JsonBuilder *b, const char *key,
                         const GPtrArray *lines);
/* "NODE": V, the node id as the member's name (objects keyed by node). */
void qp_json_add_node_member(JsonBuilder *b, int node, gint64 v);
/* V (jvalue.h) as a value, and the members of OBJECT each as a member. */
void qp_json_add_jv(JsonBuilder *b, const QpJv *v);
void qp_json_add_jv_members(JsonBuilder *b, const QpJv *object);

G_END_DECLS
