/* Members of a JSON object being built (see json-out.h). */
#include "topology/json-out.h"

void
qp_json_add_int(JsonBuilder *b, const char *key, gint64 v)
{
  json_builder_set_member_name(b, key);
  json_builder_add_int_value(b, v);
}

void
qp_json_add_string(JsonBuilder *b, const char *key, const char *v)
{
  json_builder_set_member_name(b, key);
  if (v != NULL)
    json_builder_add_string_value(b, v);
  else
    json_builder_add_null_value(b);
}

void
qp_json_add_list(JsonBuilder *b, const char *key, hwloc_const_bitmap_t set)
{
  g_autofree char *s = qp_list_format(set);
  qp_json_add_string(b, key, s);
}

void
qp_json_add_list_or_null(JsonBuilder *b, const char *key,
                         hwloc_const_bitmap_t set)
{
  if (set == NULL)
    qp_json_add_string(b, key, NULL);
  else
    qp_json_add_list(b, key, set);
}

void
qp_json_add_strings(JsonBuilder *b, const char *key, const GPtrArray *lines)
{
  json_builder_set_member_name(b, key);
  json_builder_begin_array(b);
  for (guint i = 0; lines != NULL && i < lines->len; i++)
    json_builder_add_string_value(b, g_ptr_array_index(lines, i));
  json_builder_end_array(b);
}

/* "NODE": V, the node id as the member's name. */
static void
add_node_member(JsonBuilder *b, int node, gint64 v)
{
  char key[16];
  g_snprintf(key, sizeof key, "%d", node);
  qp_json_add_int(b, key, v);
}

static void
add_node_mib(JsonBuilder *b, const char *key, const GArray *amounts)
{
  json_builder_set_member_name(b, key);
  json_builder_begin_object(b);
  for (guint i = 0; amounts != NULL && i < amounts->len; i++) {
    const QpNodeAmount *a = &g_array_index(amounts, QpNodeAmount, i);
    add_node_member(b, a->node, (gint64)a->mib);
  }
  json_builder_end_object(b);
}

static void
add_node_vcpus(JsonBuilder *b, const char *key, const GArray *loads)
{
  json_builder_set_member_name(b, key);
  json_builder_begin_object(b);
  for (guint i = 0; loads != NULL && i < loads->len; i++) {
    const QpNodeLoad *l = &g_array_index(loads, QpNodeLoad, i);
    add_node_member(b, l->node, l->vcpus);
  }
  json_builder_end_object(b);
}

void
qp_json_add_node_units(JsonBuilder *b, const char *key, const GArray *units)
{
  json_builder_set_member_name(b, key);
  json_builder_begin_object(b);
  for (guint i = 0; units != NULL && i < units->len; i++) {
    const QpNodeUnits *u = &g_array_index(units, QpNodeUnits, i);
    add_node_member(b, u->node, (gint64)u->units);
  }
  json_builder_end_object(b);
}

static void
add_huge_claims(JsonBuilder *b, const char *key, const GArray *huge)
{
  json_builder_set_member_name(b, key);
  json_builder_begin_array(b);
  for (guint i = 0; huge != NULL && i < huge->len; i++) {
    const QpHugeClaim *h = &g_array_index(huge, QpHugeClaim, i);
    json_builder_begin_object(b);
    qp_json_add_int(b, "node", h->node);
    qp_json_add_int(b, "page-kib", (gint64)h->page_kib);
    qp_json_add_int(b, "pages", (gint64)h->pages);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
}

static void
add_cpu_loads(JsonBuilder *b, const char *key, const GArray *loads)
{
  json_builder_set_member_name(b, key);
  json_builder_begin_array(b);
  for (guint i = 0; loads != NULL && i < loads->len; i++) {
    const QpCpuLoad *l = &g_array_index(loads, QpCpuLoad, i);
    json_builder_begin_object(b);
    qp_json_add_list(b, "cpus", l->cpus);
    qp_json_add_int(b, "vcpus", l->vcpus);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
}

void
qp_json_add_holdings(JsonBuilder *b, const GArray *mem, const GArray *huge,
                     hwloc_const_bitmap_t dedicated, const GArray *load,
                     const GArray *cpu_load)
{
  add_node_mib(b, "memory-mib", mem);
  add_huge_claims(b, "hugepages", huge);
  qp_json_add_list(b, "dedicated-cpus", dedicated);
  add_node_vcpus(b, "load", load);
  add_cpu_loads(b, "cpu-load", cpu_load);
}
