/* Members of a JSON object being built: the few shapes qemu-pin writes in
 * its records, plans, status and host views. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <hwloc.h>

#include "topology/plan.h"

G_BEGIN_DECLS

/* "KEY": V */
void qp_json_add_int(JsonBuilder *b, const char *key, gint64 v);
/* "KEY": "V", or null when V is NULL */
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

/* Per node objects {"0": 512, "1": 512}, keyed by node id, from GArrays
 * of QpNodeAmount (MiB), QpNodeLoad (vCPUs) or QpNodeUnits (NULL: {}). */
void qp_json_add_node_mib(JsonBuilder *b, const char *key,
                          const GArray *amounts);
void qp_json_add_node_vcpus(JsonBuilder *b, const char *key,
                            const GArray *loads);
void qp_json_add_node_units(JsonBuilder *b, const char *key,
                            const GArray *units);

/* "KEY": [{"node", "page-kib", "pages"}, ...] from QpHugeClaim (NULL: []) */
void qp_json_add_huge_claims(JsonBuilder *b, const char *key,
                             const GArray *huge);
/* "KEY": [{"cpus", "vcpus"}, ...] from QpCpuLoad (NULL: []) */
void qp_json_add_cpu_loads(JsonBuilder *b, const char *key,
                           const GArray *loads);

G_END_DECLS
