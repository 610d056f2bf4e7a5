/* A plan as JSON (docs/plan-schema.md) and as text for people. */
#include "topology/plan.h"

#include "topology/base/json.h"
#include "topology/ledger/ledger.h"
#include "topology/plan/devices.h"

/* ---- JSON --------------------------------------------------------------- */

static void
add_vcpus_json(JsonBuilder *b, const QpPlan *plan)
{
  json_builder_set_member_name(b, "vcpus");
  json_builder_begin_array(b);
  for (guint v = 0; v < plan->n_vcpus; v++) {
    json_builder_begin_object(b);
    qp_json_add_int(b, "index", v);
    qp_json_add_list_or_null(b, "cpus", plan->vcpu_cpus[v]);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
}

/* "KEY": {"0": 512, "1": 512}: QpNodeUnits keyed by node id (NULL: {}) */
static void
add_node_units(JsonBuilder *b, const char *key, const GArray *units)
{
  json_builder_set_member_name(b, key);
  json_builder_begin_object(b);
  for (guint i = 0; units != NULL && i < units->len; i++) {
    const QpNodeUnits *u = &g_array_index(units, QpNodeUnits, i);
    qp_json_add_node_member(b, u->node, (gint64)u->units);
  }
  json_builder_end_object(b);
}

static void
add_mem_json(JsonBuilder *b, const QpPlanMem *pm)
{
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "guest-node");
  if (pm->gnode >= 0)
    json_builder_add_int_value(b, pm->gnode);
  else
    json_builder_add_null_value(b);
  qp_json_add_list_or_null(b, "host-nodes", pm->host_nodes);
  qp_json_add_string(b, "policy", qp_policy_name(pm->policy));
  qp_json_add_int(b, "size-mib", (gint64)pm->mem_mib);
  qp_json_add_string(b, "memdev", pm->memdev);
  json_builder_set_member_name(b, "caller-set");
  json_builder_add_boolean_value(b, pm->caller_set);
  qp_json_add_string(b, "kind", qp_mem_kind_name(pm->kind));
  qp_json_add_string(b, "device", pm->device);
  qp_json_add_int(b, "page-kib", (gint64)pm->page_kib);
  add_node_units(b, "claimed", pm->claim);
  json_builder_end_object(b);
}

/* What the ledger records for the VM. */
static void
add_claims_json(JsonBuilder *b, const QpPlan *plan)
{
  json_builder_set_member_name(b, "claims");
  json_builder_begin_object(b);
  qp_json_add_holdings(b, plan->claim_mem, plan->claim_huge, plan->dedicated,
                       plan->load, plan->cpu_load);
  json_builder_end_object(b);
}

static void
add_vnuma_json(JsonBuilder *b, const QpPlan *plan)
{
  json_builder_set_member_name(b, "vnuma");
  json_builder_begin_object(b);
  qp_json_add_int(b, "sockets", plan->vnuma_sockets);
  qp_json_add_int(b, "dies", MAX(plan->vnuma_dies, 1));
  qp_json_add_int(b, "cores", plan->vnuma_cores);
  qp_json_add_int(b, "threads", plan->vnuma_threads);
  json_builder_set_member_name(b, "nodes");
  json_builder_begin_array(b);
  for (guint n = 0; n < plan->n_vnodes; n++) {
    const QpPlanVnode *vn = &plan->vnodes[n];
    json_builder_begin_object(b);
    qp_json_add_int(b, "id", vn->id);
    qp_json_add_list_or_null(b, "vcpus", vn->vcpus);
    qp_json_add_int(b, "size-mib", (gint64)vn->mem_mib);
    qp_json_add_int(b, "host-node", vn->host_node);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  json_builder_set_member_name(b, "distances");
  json_builder_begin_array(b);
  for (guint x = 0; x < plan->n_vnodes; x++) {
    json_builder_begin_array(b);
    for (guint y = 0; y < plan->n_vnodes; y++)
      json_builder_add_int_value(b,
                                 plan->vnode_distance[x * plan->n_vnodes + y]);
    json_builder_end_array(b);
  }
  json_builder_end_array(b);
  json_builder_end_object(b);
}

static void
add_hotplug_json(JsonBuilder *b, const QpPlan *plan)
{
  qp_json_add_int(b, "boot-vcpus", plan->n_boot_vcpus);
  json_builder_set_member_name(b, "hotplug-cores");
  json_builder_begin_array(b);
  for (guint c = 0; c < plan->hotplug_cores->len; c++) {
    g_autofree char *l =
        qp_list_format(g_ptr_array_index(plan->hotplug_cores, c));
    json_builder_add_string_value(b, l);
  }
  json_builder_end_array(b);
}

JsonNode *
qp_plan_to_json(const QpPlan *plan)
{
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  qp_json_add_string(b, "mode", qp_mode_name(plan->mode));
  json_builder_set_member_name(b, "best-effort");
  json_builder_add_boolean_value(b, plan->best_effort);
  qp_json_add_strings(b, "not-given", plan->not_given);
  add_vcpus_json(b, plan);
  qp_json_add_list_or_null(b, "process-cpus", plan->process_cpus);
  qp_json_add_list_or_null(b, "emulator-cpus", plan->emulator_cpus);
  qp_json_add_list_or_null(b, "iothread-cpus", plan->iothread_cpus);
  qp_json_add_list_or_null(b, "startup-cpus", plan->startup_cpus);
  qp_json_add_list_or_null(b, "host-nodes", plan->host_nodes);
  qp_json_add_list_or_null(b, "memory-nodes", plan->mem_nodes);
  qp_json_add_string(b, "memory-policy",
                     plan->mem_nodes != NULL ? qp_policy_name(plan->mem_policy)
                                             : NULL);
  json_builder_set_member_name(b, "memory");
  json_builder_begin_array(b);
  for (guint m = 0; m < plan->n_mem; m++)
    add_mem_json(b, &plan->mem[m]);
  json_builder_end_array(b);
  add_claims_json(b, plan);
  plan_devices_json(b, plan);
  if (plan->vnuma)
    add_vnuma_json(b, plan);
  if (plan->hotplug_cores != NULL)
    add_hotplug_json(b, plan);
  qp_json_add_strings(b, "reasons", plan->reasons);
  qp_json_add_strings(b, "warnings", plan->warnings);
  json_builder_end_object(b);
  return json_builder_get_root(b);
}

/* ---- Text --------------------------------------------------------------- */

static char *
fmt_list(hwloc_const_bitmap_t set)
{
  if (set == NULL)
    return g_strdup("-");
  char *l = qp_list_format(set);
  if (*l == '\0') {
    g_free(l);
    return g_strdup("-");
  }
  return l;
}

/* The sets of the plan, one line each. */
static void
append_sets(GString *s, const QpPlan *plan)
{
  g_autofree char *proc = fmt_list(plan->process_cpus);
  g_autofree char *emu = fmt_list(plan->emulator_cpus);
  g_autofree char *io = fmt_list(plan->iothread_cpus);
  g_autofree char *start = fmt_list(plan->startup_cpus);
  g_autofree char *nodes = fmt_list(plan->host_nodes);
  g_autofree char *memn = fmt_list(plan->mem_nodes);
  g_autofree char *ded = fmt_list(plan->dedicated);

  g_string_append_printf(s, "mode            %s%s\n", qp_mode_name(plan->mode),
                         plan->best_effort ? " (best effort)" : "");
  g_string_append_printf(s, "host nodes      %s\n", nodes);
  g_string_append_printf(s, "process CPUs    %s\n", proc);
  g_string_append_printf(s, "emulator CPUs   %s\n", emu);
  g_string_append_printf(s, "iothread CPUs   %s\n", io);
  g_string_append_printf(s, "startup CPUs    %s\n", start);
  g_string_append_printf(s, "dedicated CPUs  %s\n", ded);
  for (guint i = 0; plan->cpu_load != NULL && i < plan->cpu_load->len; i++) {
    const QpCpuLoad *l = &g_array_index(plan->cpu_load, QpCpuLoad, i);
    g_autofree char *cl = fmt_list(l->cpus);
    g_string_append_printf(s, "shared vCPUs    %u on CPUs %s\n", l->vcpus, cl);
  }
  if (plan->mem_nodes != NULL)
    g_string_append_printf(s, "memory policy   %s on nodes %s\n",
                           qp_policy_name(plan->mem_policy), memn);
  else
    g_string_append(s, "memory policy   not bound\n");
}

/* vCPUs with the same CPUs in runs: "0-7  0-1,4-5" */
static void
append_vcpus(GString *s, const QpPlan *plan)
{
  g_string_append(s, "\nvCPUs       host CPUs\n");
  for (guint v = 0; v < plan->n_vcpus;) {
    guint w = v + 1;
    while (w < plan->n_vcpus &&
           hwloc_bitmap_isequal(plan->vcpu_cpus[w], plan->vcpu_cpus[v]))
      w++;
    g_autofree char *vs = w - v > 1 ? g_strdup_printf("%u-%u", v, w - 1)
                                    : g_strdup_printf("%u", v);
    g_autofree char *cs = fmt_list(plan->vcpu_cpus[v]);
    g_string_append_printf(s, "%-11s %s\n", vs, cs);
    v = w;
  }
}

/* One row per piece of the guest's memory. */
static void
append_mem(GString *s, const QpPlan *plan)
{
  if (plan->n_mem == 0)
    return;
  g_string_append(s, "\nguest node  host nodes  policy      MiB       "
                     "memdev          bound by  memory\n");
  for (guint m = 0; m < plan->n_mem; m++) {
    const QpPlanMem *pm = &plan->mem[m];
    g_autofree char *g =
        pm->gnode >= 0 ? g_strdup_printf("%d", pm->gnode) : g_strdup("-");
    g_autofree char *hn = fmt_list(pm->host_nodes);
    g_autofree char *what = g_strdup_printf(
        "%s%s%s%s", qp_mem_kind_name(pm->kind), pm->device != NULL ? " " : "",
        pm->device != NULL ? pm->device : "",
        pm->page_kib != 0 ? ", hugepages" : "");
    g_string_append_printf(
        s, "%-11s %-11s %-11s %-9" G_GUINT64_FORMAT " %-15s %-9s %s\n", g, hn,
        qp_policy_name(pm->policy), pm->mem_mib,
        pm->memdev != NULL ? pm->memdev : "-",
        pm->host_nodes == NULL ? "not bound"
        : pm->caller_set       ? "caller"
                               : "qemu-pin",
        what);
  }
}

/* The node ids the claims table shows: the host's, or without a host
 * those the claims name. */
static GArray *
claim_node_ids(const QpPlan *plan, const QpHost *host)
{
  GArray *ids = g_array_new(FALSE, FALSE, sizeof(int));
  if (host != NULL) {
    for (guint i = 0; i < host->n_nodes; i++)
      g_array_append_val(ids, host->nodes[i].id);
    return ids;
  }
  for (guint i = 0; i < plan->claim_mem->len; i++)
    g_array_append_val(ids,
                       g_array_index(plan->claim_mem, QpNodeAmount, i).node);
  for (guint i = 0; i < plan->claim_huge->len; i++)
    g_array_append_val(ids,
                       g_array_index(plan->claim_huge, QpHugeClaim, i).node);
  for (guint i = 0; i < plan->load->len; i++)
    g_array_append_val(ids, g_array_index(plan->load, QpNodeLoad, i).node);
  return ids;
}

/* The claims row of node ID, if the plan claims anything there. */
static void
append_claims_row(GString *s, const QpPlan *plan, int id)
{
  guint64 mib = 0;
  guint vcpus = 0;
  g_autoptr(GString) huge = g_string_new("");
  for (guint i = 0; i < plan->claim_mem->len; i++)
    if (g_array_index(plan->claim_mem, QpNodeAmount, i).node == id)
      mib += g_array_index(plan->claim_mem, QpNodeAmount, i).mib;
  for (guint i = 0; i < plan->claim_huge->len; i++) {
    const QpHugeClaim *h = &g_array_index(plan->claim_huge, QpHugeClaim, i);
    if (h->node == id)
      g_string_append_printf(
          huge, "%s%" G_GUINT64_FORMAT " x %" G_GUINT64_FORMAT " KiB",
          huge->len ? ", " : "", h->pages, h->page_kib);
  }
  for (guint i = 0; i < plan->load->len; i++)
    if (g_array_index(plan->load, QpNodeLoad, i).node == id)
      vcpus += g_array_index(plan->load, QpNodeLoad, i).vcpus;
  if (mib == 0 && huge->len == 0 && vcpus == 0)
    return;
  g_string_append_printf(s, "        %-5d %-11" G_GUINT64_FORMAT " %-19s %u\n",
                         id, mib, huge->len ? huge->str : "-", vcpus);
}

static void
append_claims(GString *s, const QpPlan *plan, const QpHost *host)
{
  g_string_append(s, "\nclaims: node  memory MiB  hugepages           "
                     "shared vCPUs\n");
  g_autoptr(GArray) ids = claim_node_ids(plan, host);
  g_auto(hwloc_bitmap_t) shown = hwloc_bitmap_alloc();
  for (guint x = 0; x < ids->len; x++) {
    int id = g_array_index(ids, int, x);
    if (id < 0 || hwloc_bitmap_isset(shown, id))
      continue;
    hwloc_bitmap_set(shown, id);
    append_claims_row(s, plan, id);
  }
}

static void
append_vnuma(GString *s, const QpPlan *plan)
{
  if (!plan->vnuma)
    return;
  g_string_append_printf(s,
                         "\nsuggested guest topology: sockets=%u dies=%u "
                         "cores=%u threads=%u\n",
                         plan->vnuma_sockets, MAX(plan->vnuma_dies, 1),
                         plan->vnuma_cores, plan->vnuma_threads);
  for (guint n = 0; n < plan->n_vnodes; n++) {
    g_autofree char *vl = fmt_list(plan->vnodes[n].vcpus);
    g_string_append_printf(s,
                           "  -numa node,nodeid=%d,cpus=%s (%" G_GUINT64_FORMAT
                           " MiB, host node %d)\n",
                           plan->vnodes[n].id, vl, plan->vnodes[n].mem_mib,
                           plan->vnodes[n].host_node);
  }
}

/* "\nTITLE:\n  MARK line\n..." when there are LINES. */
static void
append_lines(GString *s, const char *title, const char *mark,
             const GPtrArray *lines)
{
  if (lines == NULL || lines->len == 0)
    return;
  g_string_append_printf(s, "\n%s:\n", title);
  for (guint i = 0; i < lines->len; i++)
    g_string_append_printf(s, "  %s %s\n", mark,
                           (const char *)g_ptr_array_index(lines, i));
}

char *
qp_plan_to_human(const QpPlan *plan, const QpHost *host)
{
  GString *s = g_string_new("");
  append_sets(s, plan);
  append_vcpus(s, plan);
  append_mem(s, plan);
  plan_devices_text(s, plan);
  append_claims(s, plan, host);
  append_vnuma(s, plan);
  append_lines(s, "reasons", "-", plan->reasons);
  append_lines(s, "warnings", "!", plan->warnings);
  return g_string_free(s, FALSE);
}
