/* A plan as JSON (docs/plan-schema.md) and as text for people. */
#include "topology/plan.h"

static void
json_list(JsonBuilder *b, const char *name, hwloc_const_bitmap_t set)
{
  json_builder_set_member_name(b, name);
  if (set == NULL) {
    json_builder_add_null_value(b);
    return;
  }
  g_autofree char *l = qp_list_format(set);
  json_builder_add_string_value(b, l);
}

static void
json_strings(JsonBuilder *b, const char *name, GPtrArray *lines)
{
  json_builder_set_member_name(b, name);
  json_builder_begin_array(b);
  for (guint i = 0; lines != NULL && i < lines->len; i++)
    json_builder_add_string_value(b, g_ptr_array_index(lines, i));
  json_builder_end_array(b);
}

JsonNode *
qp_plan_to_json(const QpPlan *plan)
{
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "mode");
  json_builder_add_string_value(b, qp_mode_name(plan->mode));
  json_builder_set_member_name(b, "best-effort");
  json_builder_add_boolean_value(b, plan->best_effort);
  json_strings(b, "not-given", plan->not_given);

  json_builder_set_member_name(b, "vcpus");
  json_builder_begin_array(b);
  for (guint v = 0; v < plan->n_vcpus; v++) {
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "index");
    json_builder_add_int_value(b, v);
    json_list(b, "cpus", plan->vcpu_cpus[v]);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);

  json_list(b, "process-cpus", plan->process_cpus);
  json_list(b, "emulator-cpus", plan->emulator_cpus);
  json_list(b, "iothread-cpus", plan->iothread_cpus);
  json_list(b, "startup-cpus", plan->startup_cpus);
  json_list(b, "host-nodes", plan->host_nodes);
  json_list(b, "memory-nodes", plan->mem_nodes);
  json_builder_set_member_name(b, "memory-policy");
  if (plan->mem_nodes != NULL)
    json_builder_add_string_value(b, qp_policy_name(plan->mem_policy));
  else
    json_builder_add_null_value(b);

  json_builder_set_member_name(b, "memory");
  json_builder_begin_array(b);
  for (guint m = 0; m < plan->n_mem; m++) {
    const QpPlanMem *pm = &plan->mem[m];
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "guest-node");
    if (pm->gnode >= 0)
      json_builder_add_int_value(b, pm->gnode);
    else
      json_builder_add_null_value(b);
    json_list(b, "host-nodes", pm->host_nodes);
    json_builder_set_member_name(b, "policy");
    json_builder_add_string_value(b, qp_policy_name(pm->policy));
    json_builder_set_member_name(b, "size-mib");
    json_builder_add_int_value(b, (gint64)pm->mem_mib);
    json_builder_set_member_name(b, "memdev");
    if (pm->memdev != NULL)
      json_builder_add_string_value(b, pm->memdev);
    else
      json_builder_add_null_value(b);
    json_builder_set_member_name(b, "caller-set");
    json_builder_add_boolean_value(b, pm->caller_set);
    json_builder_set_member_name(b, "kind");
    json_builder_add_string_value(b, qp_mem_kind_name(pm->kind));
    json_builder_set_member_name(b, "device");
    if (pm->device != NULL)
      json_builder_add_string_value(b, pm->device);
    else
      json_builder_add_null_value(b);
    json_builder_set_member_name(b, "page-kib");
    json_builder_add_int_value(b, (gint64)pm->page_kib);
    json_builder_set_member_name(b, "claimed");
    json_builder_begin_object(b);
    for (guint c = 0; pm->claim != NULL && c < pm->claim->len; c++) {
      const QpNodeUnits *u = &g_array_index(pm->claim, QpNodeUnits, c);
      g_autofree char *k = g_strdup_printf("%d", u->node);
      json_builder_set_member_name(b, k);
      json_builder_add_int_value(b, (gint64)u->units);
    }
    json_builder_end_object(b);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);

  json_builder_set_member_name(b, "claims");
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "memory-mib");
  json_builder_begin_object(b);
  for (guint i = 0; plan->claim_mem != NULL && i < plan->claim_mem->len; i++) {
    const QpNodeAmount *a = &g_array_index(plan->claim_mem, QpNodeAmount, i);
    g_autofree char *k = g_strdup_printf("%d", a->node);
    json_builder_set_member_name(b, k);
    json_builder_add_int_value(b, (gint64)a->mib);
  }
  json_builder_end_object(b);
  json_builder_set_member_name(b, "hugepages");
  json_builder_begin_array(b);
  for (guint i = 0; plan->claim_huge != NULL && i < plan->claim_huge->len;
       i++) {
    const QpHugeClaim *h = &g_array_index(plan->claim_huge, QpHugeClaim, i);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "node");
    json_builder_add_int_value(b, h->node);
    json_builder_set_member_name(b, "page-kib");
    json_builder_add_int_value(b, (gint64)h->page_kib);
    json_builder_set_member_name(b, "pages");
    json_builder_add_int_value(b, (gint64)h->pages);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  json_list(b, "dedicated-cpus", plan->dedicated);
  json_builder_set_member_name(b, "load");
  json_builder_begin_object(b);
  for (guint i = 0; plan->load != NULL && i < plan->load->len; i++) {
    const QpNodeLoad *l = &g_array_index(plan->load, QpNodeLoad, i);
    g_autofree char *k = g_strdup_printf("%d", l->node);
    json_builder_set_member_name(b, k);
    json_builder_add_int_value(b, l->vcpus);
  }
  json_builder_end_object(b);
  json_builder_set_member_name(b, "cpu-load");
  json_builder_begin_array(b);
  for (guint i = 0; plan->cpu_load != NULL && i < plan->cpu_load->len; i++) {
    const QpCpuLoad *l = &g_array_index(plan->cpu_load, QpCpuLoad, i);
    json_builder_begin_object(b);
    json_list(b, "cpus", l->cpus);
    json_builder_set_member_name(b, "vcpus");
    json_builder_add_int_value(b, l->vcpus);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  json_builder_end_object(b);

  if (plan->vnuma) {
    json_builder_set_member_name(b, "vnuma");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "sockets");
    json_builder_add_int_value(b, plan->vnuma_sockets);
    json_builder_set_member_name(b, "cores");
    json_builder_add_int_value(b, plan->vnuma_cores);
    json_builder_set_member_name(b, "threads");
    json_builder_add_int_value(b, plan->vnuma_threads);
    json_builder_set_member_name(b, "nodes");
    json_builder_begin_array(b);
    for (guint n = 0; n < plan->n_vnodes; n++) {
      const QpPlanVnode *vn = &plan->vnodes[n];
      json_builder_begin_object(b);
      json_builder_set_member_name(b, "id");
      json_builder_add_int_value(b, vn->id);
      json_list(b, "vcpus", vn->vcpus);
      json_builder_set_member_name(b, "size-mib");
      json_builder_add_int_value(b, (gint64)vn->mem_mib);
      json_builder_set_member_name(b, "host-node");
      json_builder_add_int_value(b, vn->host_node);
      json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "distances");
    json_builder_begin_array(b);
    for (guint x = 0; x < plan->n_vnodes; x++) {
      json_builder_begin_array(b);
      for (guint y = 0; y < plan->n_vnodes; y++)
        json_builder_add_int_value(
            b, plan->vnode_distance[x * plan->n_vnodes + y]);
      json_builder_end_array(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
  }

  if (plan->hotplug_cores != NULL) {
    json_builder_set_member_name(b, "boot-vcpus");
    json_builder_add_int_value(b, plan->n_boot_vcpus);
    json_builder_set_member_name(b, "hotplug-cores");
    json_builder_begin_array(b);
    for (guint c = 0; c < plan->hotplug_cores->len; c++) {
      g_autofree char *l =
          qp_list_format(g_ptr_array_index(plan->hotplug_cores, c));
      json_builder_add_string_value(b, l);
    }
    json_builder_end_array(b);
  }
  json_strings(b, "reasons", plan->reasons);
  json_strings(b, "warnings", plan->warnings);
  json_builder_end_object(b);
  return json_builder_get_root(b);
}

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

char *
qp_plan_to_human(const QpPlan *plan, const QpHost *host)
{
  GString *s = g_string_new("");
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

  /* vCPUs with the same CPUs in runs: "0-7  0-1,4-5" */
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

  if (plan->n_mem > 0) {
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

  g_string_append(s, "\nclaims: node  memory MiB  hugepages           "
                     "shared vCPUs\n");
  guint n_nodes = host != NULL ? host->n_nodes : 0;
  g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(int));
  for (guint i = 0; i < n_nodes; i++)
    g_array_append_val(ids, host->nodes[i].id);
  if (host == NULL) {
    for (guint i = 0; i < plan->claim_mem->len; i++)
      g_array_append_val(ids,
                         g_array_index(plan->claim_mem, QpNodeAmount, i).node);
    for (guint i = 0; i < plan->claim_huge->len; i++)
      g_array_append_val(ids,
                         g_array_index(plan->claim_huge, QpHugeClaim, i).node);
    for (guint i = 0; i < plan->load->len; i++)
      g_array_append_val(ids, g_array_index(plan->load, QpNodeLoad, i).node);
  }
  g_auto(hwloc_bitmap_t) shown = hwloc_bitmap_alloc();
  for (guint x = 0; x < ids->len; x++) {
    int id = g_array_index(ids, int, x);
    if (id < 0 || hwloc_bitmap_isset(shown, id))
      continue;
    hwloc_bitmap_set(shown, id);
    guint64 mib = 0;
    guint vcpus = 0;
    GString *huge = g_string_new("");
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
    if (mib == 0 && huge->len == 0 && vcpus == 0) {
      g_string_free(huge, TRUE);
      continue;
    }
    g_string_append_printf(s,
                           "        %-5d %-11" G_GUINT64_FORMAT " %-19s %u\n",
                           id, mib, huge->len ? huge->str : "-", vcpus);
    g_string_free(huge, TRUE);
  }

  if (plan->vnuma) {
    g_string_append_printf(s,
                           "\nsuggested guest topology: sockets=%u "
                           "cores=%u threads=%u\n",
                           plan->vnuma_sockets, plan->vnuma_cores,
                           plan->vnuma_threads);
    for (guint n = 0; n < plan->n_vnodes; n++) {
      g_autofree char *vl = fmt_list(plan->vnodes[n].vcpus);
      g_string_append_printf(
          s,
          "  -numa node,nodeid=%d,cpus=%s (%" G_GUINT64_FORMAT
          " MiB, host node %d)\n",
          plan->vnodes[n].id, vl, plan->vnodes[n].mem_mib,
          plan->vnodes[n].host_node);
    }
  }

  if (plan->reasons != NULL && plan->reasons->len > 0) {
    g_string_append(s, "\nreasons:\n");
    for (guint i = 0; i < plan->reasons->len; i++)
      g_string_append_printf(s, "  - %s\n",
                             (char *)g_ptr_array_index(plan->reasons, i));
  }
  if (plan->warnings != NULL && plan->warnings->len > 0) {
    g_string_append(s, "\nwarnings:\n");
    for (guint i = 0; i < plan->warnings->len; i++)
      g_string_append_printf(s, "  ! %s\n",
                             (char *)g_ptr_array_index(plan->warnings, i));
  }
  return g_string_free(s, FALSE);
}
