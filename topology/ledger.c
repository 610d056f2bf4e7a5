/* The ledger's records: the JSON form of a VM's claim (version 1, read
 * strictly: docs/ledger.md, "Record format"), and the claim a plan makes.
 * The store that keeps the records is ledger-store.c; the claim a VM holds,
 * held-claim.c. */
#include "topology/ledger.h"

#include <limits.h>
#include <string.h>

#include "topology/base/json.h"

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

/* ---- Records: JSON ---------------------------------------------------------
 */

static void
add_node_mib(JsonBuilder *b, const char *key, const GArray *amounts)
{
  json_builder_set_member_name(b, key);
  json_builder_begin_object(b);
  for (guint i = 0; amounts != NULL && i < amounts->len; i++) {
    const QpNodeAmount *a = &g_array_index(amounts, QpNodeAmount, i);
    qp_json_add_node_member(b, a->node, (gint64)a->mib);
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
    qp_json_add_node_member(b, l->node, l->vcpus);
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

char *
qp_claim_to_json(const QpClaim *c)
{
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  qp_json_add_int(b, "version", RECORD_VERSION);
  json_builder_set_member_name(b, "id");
  json_builder_add_string_value(b, c->id ? c->id : "");
  json_builder_set_member_name(b, "name");
  if (c->name)
    json_builder_add_string_value(b, c->name);
  else
    json_builder_add_null_value(b);
  if (c->uuid != NULL) {
    json_builder_set_member_name(b, "uuid");
    json_builder_add_string_value(b, c->uuid);
  }
  qp_json_add_int(b, "qemu-pid", c->qemu_pid);
  qp_json_add_int(b, "qemu-start", (gint64)c->qemu_start);
  qp_json_add_int(b, "launcher-pid", c->launcher_pid);
  qp_json_add_int(b, "launcher-start", (gint64)c->launcher_start);
  qp_json_add_int(b, "keeper-pid", c->keeper_pid);
  json_builder_set_member_name(b, "mode");
  json_builder_add_string_value(b, qp_mode_name(c->mode));
  json_builder_set_member_name(b, "best-effort");
  json_builder_add_boolean_value(b, c->best_effort);
  /* Order matters for salvage of a damaged record (docs/ledger.md): every
   * field that names nodes comes before "time". */
  qp_json_add_holdings(b, c->mem, c->huge, c->dedicated, c->load, c->cpu_load);
  qp_json_add_int(b, "time", c->time);
  if (c->devices->len > 0)
    qp_json_add_strings(b, "devices", c->devices);
  json_builder_end_object(b);

  g_autoptr(JsonGenerator) gen = json_generator_new();
  g_autoptr(JsonNode) root = json_builder_get_root(b);
  json_generator_set_root(gen, root);
  json_generator_set_pretty(gen, TRUE);
  json_generator_set_indent(gen, 2);
  char *text = json_generator_to_data(gen, NULL);
  char *out = g_strconcat(text, "\n", NULL);
  g_free(text);
  return out;
}

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

static const char *
node_type_word(JsonNode *n)
{
  if (JSON_NODE_HOLDS_NULL(n))
    return "null";
  if (JSON_NODE_HOLDS_OBJECT(n))
    return "an object";
  if (JSON_NODE_HOLDS_ARRAY(n))
    return "an array";
  GType t = json_node_get_value_type(n);
  if (t == G_TYPE_STRING)
    return "a string";
  if (t == G_TYPE_BOOLEAN)
    return "a boolean";
  if (t == G_TYPE_DOUBLE)
    return "a fractional or too large number";
  return "an integer";
}

/* The string in N, the member FIELD (NULL: missing); WHAT says what was
 * expected. */
static const char *
get_string(JsonNode *n, const char *field, const char *what, GError **error)
{
  if (n == NULL || !JSON_NODE_HOLDS_VALUE(n) ||
      json_node_get_value_type(n) != G_TYPE_STRING) {
    bad_field(error, field, "is %s; expected %s",
              n ? node_type_word(n) : "missing", what);
    return NULL;
  }
  return json_node_get_string(n);
}

/* A non-negative integer <= MAX in node N, FIELD names it in errors. */
static gboolean
get_uint(JsonNode *n, const char *field, guint64 max, guint64 *out,
         GError **error)
{
  if (n == NULL)
    return bad_field(error, field,
                     "is missing; expected a non-negative "
                     "integer");
  if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_INT64)
    return bad_field(error, field, "is %s; expected a non-negative integer",
                     node_type_word(n));
  gint64 v = json_node_get_int(n);
  if (v < 0)
    return bad_field(error, field,
                     "is %" G_GINT64_FORMAT "; expected a non-negative "
                     "integer",
                     v);
  if ((guint64)v > max)
    return bad_field(
        error, field,
        "is %" G_GINT64_FORMAT "; expected at most %" G_GUINT64_FORMAT, v, max);
  *out = (guint64)v;
  return TRUE;
}

static gboolean
get_member_uint(JsonObject *o, const char *field, guint64 max, guint64 *out,
                GError **error)
{
  return get_uint(json_object_get_member(o, field), field, max, out, error);
}

static gboolean
get_member_pid(JsonObject *o, const char *field, int *out, GError **error)
{
  guint64 v;
  if (!get_member_uint(o, field, INT_MAX, &v, error))
    return FALSE;
  *out = (int)v;
  return TRUE;
}

static gboolean
parse_node_key(const char *key, const char *field, int *out, GError **error)
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

/* { "node": value } with non-negative integer values. */
static gboolean
get_node_map(JsonObject *o, const char *field, gboolean load, GArray *out,
             GError **error)
{
  JsonNode *n = json_object_get_member(o, field);
  if (n == NULL)
    return bad_field(error, field,
                     "is missing; expected an object of node "
                     "numbers");
  if (!JSON_NODE_HOLDS_OBJECT(n))
    return bad_field(error, field,
                     "is %s; expected an object of node "
                     "numbers",
                     node_type_word(n));
  JsonObject *m = json_node_get_object(n);
  g_autoptr(GList) members = json_object_get_members(m);
  for (GList *l = members; l; l = l->next) {
    const char *key = l->data;
    int node = 0;
    if (!parse_node_key(key, field, &node, error))
      return FALSE;
    g_autofree char *sub = g_strdup_printf("%s\" node \"%s", field, key);
    guint64 v;
    if (!get_uint(json_object_get_member(m, key), sub,
                  load ? G_MAXUINT : (guint64)G_MAXINT64, &v, error))
      return FALSE;
    if (load) {
      QpNodeLoad nl = {.node = node, .vcpus = (guint)v};
      g_array_append_val(out, nl);
    } else {
      QpNodeAmount a = {.node = node, .mib = v};
      g_array_append_val(out, a);
    }
  }
  return TRUE;
}

/* "cpu-load": [ { "cpus": "0-3", "vcpus": 8 } ]; optional (records written
 * before it have only the per-node "load"). */
static gboolean
get_cpu_load(JsonObject *o, GArray *out, GError **error)
{
  JsonNode *n = json_object_get_member(o, "cpu-load");
  if (n == NULL)
    return TRUE;
  if (!JSON_NODE_HOLDS_ARRAY(n))
    return bad_field(error, "cpu-load", "is %s; expected an array",
                     node_type_word(n));
  JsonArray *arr = json_node_get_array(n);
  for (guint i = 0; i < json_array_get_length(arr); i++) {
    JsonNode *e = json_array_get_element(arr, i);
    g_autofree char *field = g_strdup_printf("cpu-load[%u]", i);
    if (!JSON_NODE_HOLDS_OBJECT(e))
      return bad_field(error, field, "is %s; expected an object",
                       node_type_word(e));
    JsonObject *eo = json_node_get_object(e);
    g_autofree char *f_cpus = g_strdup_printf("%s.cpus", field);
    g_autofree char *f_vcpus = g_strdup_printf("%s.vcpus", field);
    const char *cpus = get_string(json_object_get_member(eo, "cpus"), f_cpus,
                                  "a CPU list string", error);
    if (cpus == NULL)
      return FALSE;
    g_autofree char *origin =
        g_strdup_printf("ledger record field \"%s\"", f_cpus);
    hwloc_bitmap_t set = NULL;
    if (!qp_list_parse(cpus, origin, QP_LIST_MAX_INDEX, &set, error))
      return FALSE;
    guint64 v;
    if (!get_uint(json_object_get_member(eo, "vcpus"), f_vcpus, G_MAXUINT, &v,
                  error)) {
      hwloc_bitmap_free(set);
      return FALSE;
    }
    QpCpuLoad l = {set, (guint)v};
    g_array_append_val(out, l);
  }
  return TRUE;
}

/* The optional string member KEY of O into *OUT (absent or null: NULL). */
static gboolean
get_optional_string(JsonObject *o, const char *key, char **out, GError **error)
{
  JsonNode *n = json_object_get_member(o, key);
  if (n == NULL || JSON_NODE_HOLDS_NULL(n))
    return TRUE;
  if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_STRING)
    return bad_field(error, key, "is %s; expected a string or null",
                     node_type_word(n));
  *out = g_strdup(json_node_get_string(n));
  return TRUE;
}

/* "version", "id", "name" and "uuid". */
static gboolean
get_identity(JsonObject *o, QpClaim *c, GError **error)
{
  guint64 v;
  if (!get_member_uint(o, "version", G_MAXINT, &v, error))
    return FALSE;
  if (v != RECORD_VERSION)
    return bad_field(error, "version",
                     "is %" G_GUINT64_FORMAT "; expected %d (written by "
                     "another qemu-pin version?)",
                     v, RECORD_VERSION);
  const char *id =
      get_string(json_object_get_member(o, "id"), "id", "a string", error);
  if (id == NULL)
    return FALSE;
  if (!qp_claim_id_is_valid(id))
    return bad_field(error, "id",
                     "is \"%s\"; expected letters, digits, '-', '_' or '.' "
                     "(not leading)",
                     id);
  c->id = g_strdup(id);
  return get_optional_string(o, "name", &c->name, error) &&
         get_optional_string(o, "uuid", &c->uuid, error);
}

/* The processes that keep the record alive, and the keeper. */
static gboolean
get_processes(JsonObject *o, QpClaim *c, GError **error)
{
  return get_member_pid(o, "qemu-pid", &c->qemu_pid, error) &&
         get_member_uint(o, "qemu-start", G_MAXINT64, &c->qemu_start, error) &&
         get_member_pid(o, "launcher-pid", &c->launcher_pid, error) &&
         get_member_uint(o, "launcher-start", G_MAXINT64, &c->launcher_start,
                         error) &&
         get_member_pid(o, "keeper-pid", &c->keeper_pid, error);
}

/* "mode", and "best-effort" (optional). */
static gboolean
get_mode(JsonObject *o, QpClaim *c, GError **error)
{
  const char *mode = get_string(json_object_get_member(o, "mode"), "mode",
                                "a mode name", error);
  if (mode == NULL)
    return FALSE;
  if (!qp_mode_parse(mode, &c->mode))
    return bad_field(error, "mode",
                     "is \"%s\"; expected none, balanced, numa or one-to-one",
                     mode);
  JsonNode *n = json_object_get_member(o, "best-effort");
  if (n != NULL) {
    if (!JSON_NODE_HOLDS_VALUE(n) ||
        json_node_get_value_type(n) != G_TYPE_BOOLEAN)
      return bad_field(error, "best-effort", "is %s; expected true or false",
                       node_type_word(n));
    c->best_effort = json_node_get_boolean(n);
  }
  return TRUE;
}

/* "hugepages": [ { "node", "page-kib" (> 0), "pages" } ]. */
static gboolean
get_hugepages(JsonObject *o, GArray *out, GError **error)
{
  JsonNode *n = json_object_get_member(o, "hugepages");
  if (n == NULL || !JSON_NODE_HOLDS_ARRAY(n))
    return bad_field(error, "hugepages", "is %s; expected an array",
                     n ? node_type_word(n) : "missing");
  JsonArray *arr = json_node_get_array(n);
  for (guint i = 0; i < json_array_get_length(arr); i++) {
    JsonNode *e = json_array_get_element(arr, i);
    g_autofree char *field = g_strdup_printf("hugepages[%u]", i);
    if (!JSON_NODE_HOLDS_OBJECT(e))
      return bad_field(error, field, "is %s; expected an object",
                       node_type_word(e));
    JsonObject *eo = json_node_get_object(e);
    g_autofree char *f_node = g_strdup_printf("%s.node", field);
    g_autofree char *f_kib = g_strdup_printf("%s.page-kib", field);
    g_autofree char *f_pages = g_strdup_printf("%s.pages", field);
    guint64 node, kib, pages;
    if (!get_uint(json_object_get_member(eo, "node"), f_node, QP_LIST_MAX_INDEX,
                  &node, error) ||
        !get_uint(json_object_get_member(eo, "page-kib"), f_kib, G_MAXINT64,
                  &kib, error) ||
        !get_uint(json_object_get_member(eo, "pages"), f_pages, G_MAXINT64,
                  &pages, error))
      return FALSE;
    if (kib == 0)
      return bad_field(error, f_kib, "is 0; expected a page size in KiB");
    QpHugeClaim h = {.node = (int)node, .page_kib = kib, .pages = pages};
    g_array_append_val(out, h);
  }
  return TRUE;
}

/* "dedicated-cpus": a CPU list, "" for none. */
static gboolean
get_dedicated(JsonObject *o, hwloc_bitmap_t out, GError **error)
{
  const char *cpus = get_string(json_object_get_member(o, "dedicated-cpus"),
                                "dedicated-cpus", "a CPU list string", error);
  if (cpus == NULL)
    return FALSE;
  if (*cpus == '\0')
    return TRUE;
  g_auto(hwloc_bitmap_t) set = NULL;
  if (!qp_list_parse(cpus, "ledger record field \"dedicated-cpus\"",
                     QP_LIST_MAX_INDEX, &set, error))
    return FALSE;
  hwloc_bitmap_copy(out, set);
  return TRUE;
}

/* "devices" (optional): strings. */
static gboolean
get_devices(JsonObject *o, GPtrArray *out, GError **error)
{
  JsonNode *n = json_object_get_member(o, "devices");
  if (n == NULL)
    return TRUE;
  if (!JSON_NODE_HOLDS_ARRAY(n))
    return bad_field(error, "devices", "is %s; expected an array of strings",
                     node_type_word(n));
  JsonArray *a = json_node_get_array(n);
  for (guint i = 0; i < json_array_get_length(a); i++) {
    const char *s =
        get_string(json_array_get_element(a, i), "devices", "a string", error);
    if (s == NULL)
      return FALSE;
    g_ptr_array_add(out, g_strdup(s));
  }
  return TRUE;
}

QpClaim *
qp_claim_from_json(const char *text, gsize len, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new();
  g_autoptr(GError) local = NULL;
  if (!json_parser_load_from_data(parser, text, (gssize)len, &local)) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID,
                "ledger record is not valid JSON: %s", local->message);
    return NULL;
  }
  JsonNode *root = json_parser_get_root(parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT(root)) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID,
                "ledger record is %s; expected a JSON object",
                root ? node_type_word(root) : "empty");
    return NULL;
  }
  JsonObject *o = json_node_get_object(root);
  g_autoptr(QpClaim) c = qp_claim_new();
  guint64 time;
  /* In the order written, so that the first bad field is named. */
  if (!get_identity(o, c, error) || !get_processes(o, c, error) ||
      !get_mode(o, c, error) ||
      !get_node_map(o, "memory-mib", FALSE, c->mem, error) ||
      !get_hugepages(o, c->huge, error) ||
      !get_dedicated(o, c->dedicated, error) ||
      !get_node_map(o, "load", TRUE, c->load, error) ||
      !get_cpu_load(o, c->cpu_load, error) ||
      !get_member_uint(o, "time", G_MAXINT64, &time, error) ||
      !get_devices(o, c->devices, error))
    return NULL;
  c->time = (gint64)time;
  return g_steal_pointer(&c);
}

/* ---- Claims from plans --------------------------------------------------- */

QpClaim *
qp_claim_from_plan(const QpPlan *plan, const char *id, const char *name)
{
  QpClaim *c = qp_claim_new();
  c->id = g_strdup(id);
  /* A record is JSON: a -name that is not UTF-8 must not corrupt it. */
  c->name = name != NULL ? g_utf8_make_valid(name, -1) : NULL;
  c->mode = plan->mode;
  if (plan->claim_mem)
    g_array_append_vals(c->mem, plan->claim_mem->data, plan->claim_mem->len);
  if (plan->claim_huge)
    g_array_append_vals(c->huge, plan->claim_huge->data, plan->claim_huge->len);
  if (plan->load)
    g_array_append_vals(c->load, plan->load->data, plan->load->len);
  qp_cpu_load_copy(c->cpu_load, plan->cpu_load);
  c->best_effort = plan->best_effort;
  if (plan->dedicated)
    hwloc_bitmap_copy(c->dedicated, plan->dedicated);
  c->time = g_get_real_time() / G_USEC_PER_SEC;
  for (guint i = 0; plan->devices != NULL && i < plan->devices->len; i++)
    g_ptr_array_add(c->devices, qp_plan_device_words(plan, i));
  return c;
}
