/* The views as JSON, for machines: `qemu-pin topology --json`, `qemu-pin
 * plan` and `qemu-pin status --json` (see status.h). */
#include "topology/status/status.h"

#include "topology/base/json.h"
#include "topology/plan/capacity.h"
#include "topology/host/cache-domains.h"
#include "topology/ledger/ledger.h"
#include "topology/status/usage.h"

/* ---- The host ------------------------------------------------------------ */

/* The domains of node ID: "cache_domains" (docs/plan-schema.md). */
static void
add_cache_domains(const QpHost *host, int id, JsonBuilder *b)
{
  json_builder_set_member_name(b, "cache_domains");
  json_builder_begin_array(b);
  for (guint d = 0; d < host->n_domains; d++) {
    const QpCacheDomain *cd = &host->domains[d];
    if (cd->node != id)
      continue;
    json_builder_begin_object(b);
    qp_json_add_string(b, "level", qp_cache_level_name(cd->level));
    qp_json_add_list(b, "cpus", cd->cpus);
    qp_json_add_int(b, "cores", cd->n_cores);
    qp_json_add_int(b, "size_kib", (gint64)cd->size_kib);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
}

JsonNode *
qp_host_to_json(const QpHost *host)
{
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "source");
  qp_json_add_string_value(b, host->source);

  json_builder_set_member_name(b, "nodes");
  json_builder_begin_array(b);
  for (guint i = 0; i < host->n_nodes; i++) {
    const QpNode *n = &host->nodes[i];
    json_builder_begin_object(b);
    qp_json_add_int(b, "id", n->id);
    qp_json_add_int(b, "total_mib", (gint64)n->total_mib);
    qp_json_add_int(b, "free_mib", (gint64)n->free_mib);
    qp_json_add_list(b, "cpus", n->cpus);
    qp_json_add_list(b, "all_cpus", n->all_cpus);
    json_builder_set_member_name(b, "hugepages");
    json_builder_begin_array(b);
    for (guint h = 0; h < n->hugepages->len; h++) {
      const QpHugePool *p = &g_array_index(n->hugepages, QpHugePool, h);
      json_builder_begin_object(b);
      qp_json_add_int(b, "page_kib", (gint64)p->page_kib);
      qp_json_add_int(b, "total", (gint64)p->total);
      qp_json_add_int(b, "free", (gint64)p->free);
      json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "distances");
    json_builder_begin_array(b);
    for (guint j = 0; j < host->n_nodes; j++)
      json_builder_add_int_value(b, host->distance[i * host->n_nodes + j]);
    json_builder_end_array(b);
    add_cache_domains(host, n->id, b);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);

  json_builder_set_member_name(b, "cores");
  json_builder_begin_array(b);
  for (guint i = 0; i < host->n_cores; i++) {
    json_builder_begin_object(b);
    qp_json_add_int(b, "package", host->cores[i].package);
    qp_json_add_int(b, "node", host->cores[i].node);
    qp_json_add_list(b, "cpus", host->cores[i].pus);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);

  qp_json_add_list(b, "allowed", host->allowed);
  qp_json_add_list(b, "allowed_nodes", host->allowed_nodes);
  /* Of the allowed nodes, those whose CPUs only this process may use. */
  g_auto(hwloc_bitmap_t) denied = host->mem_denied != NULL
                                      ? hwloc_bitmap_dup(host->mem_denied)
                                      : hwloc_bitmap_alloc();
  qp_json_add_list(b, "memory_denied_nodes", denied);

  json_builder_set_member_name(b, "kinds");
  json_builder_begin_array(b);
  for (guint k = 0; k < host->n_kinds; k++) {
    g_auto(hwloc_bitmap_t) set = qp_host_kind_cpus(host, k);
    json_builder_begin_object(b);
    qp_json_add_int(b, "index", k);
    json_builder_set_member_name(b, "name");
    qp_json_add_string_value(b, host->kind_names[k]);
    qp_json_add_int(b, "efficiency", host->kind_efficiency[k]);
    qp_json_add_list(b, "cpus", set);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);

  json_builder_set_member_name(b, "pci");
  json_builder_begin_array(b);
  for (guint i = 0; i < host->pci->len; i++) {
    const QpPciDevice *d = &g_array_index(host->pci, QpPciDevice, i);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "bdf");
    qp_json_add_string_value(b, d->bdf);
    qp_json_add_int(b, "node", d->node);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);

  json_builder_end_object(b);
  return json_builder_get_root(b);
}

/* ---- The plan ------------------------------------------------------------ */

static void
add_node_or_null(JsonBuilder *b, const char *key, int node)
{
  json_builder_set_member_name(b, key);
  if (node >= 0)
    json_builder_add_int_value(b, node);
  else
    json_builder_add_null_value(b);
}

/* The plan's "devices" and "iothreads" members. */
static void
add_devices_json(JsonBuilder *b, const QpPlan *plan)
{
  json_builder_set_member_name(b, "devices");
  json_builder_begin_array(b);
  for (guint d = 0; plan->devices != NULL && d < plan->devices->len; d++) {
    const QpPlanDevice *dev = plan->devices->pdata[d];
    json_builder_begin_object(b);
    qp_json_add_string(b, "device", dev->what);
    qp_json_add_string(b, "pci", dev->bdf);
    add_node_or_null(b, "host-node", dev->node);
    qp_json_add_string(b, "iothread", dev->iothread);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  json_builder_set_member_name(b, "iothreads");
  json_builder_begin_array(b);
  for (guint i = 0; plan->iothreads != NULL && i < plan->iothreads->len; i++) {
    const QpPlanIothread *t = plan->iothreads->pdata[i];
    json_builder_begin_object(b);
    qp_json_add_string(b, "id", t->id);
    add_node_or_null(b, "host-node", t->node);
    qp_json_add_list(b, "cpus", t->cpus);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
}

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
    qp_json_add_string_value(b, l);
  }
  json_builder_end_array(b);
}

/* "ignored-record": the running VM's own record the plan left out, or
 * null. */
static void
add_ignored_json(JsonBuilder *b, const QpPlan *plan)
{
  json_builder_set_member_name(b, "ignored-record");
  if (plan->ignored == NULL) {
    json_builder_add_null_value(b);
    return;
  }
  const QpClaim *c = plan->ignored;
  json_builder_begin_object(b);
  qp_json_add_string(b, "id", c->id);
  qp_json_add_string(b, "name", c->name);
  qp_json_add_string(b, "uuid", c->uuid);
  qp_json_add_int(b, "qemu-pid", (gint64)MAX(c->qemu_pid, 0));
  qp_json_add_string(b, "matched-by", plan->ignored_by);
  json_builder_end_object(b);
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
  add_ignored_json(b, plan);
  add_vcpus_json(b, plan);
  qp_json_add_list_or_null(b, "process-cpus", plan->process_cpus);
  qp_json_add_list_or_null(b, "emulator-cpus", plan->emulator_cpus);
  qp_json_add_list_or_null(b, "iothread-cpus", plan->iothread_cpus);
  qp_json_add_list_or_null(b, "startup-cpus", plan->startup_cpus);
  json_builder_set_member_name(b, "pause");
  json_builder_add_boolean_value(b, plan->pause);
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
  add_devices_json(b, plan);
  if (plan->vnuma)
    add_vnuma_json(b, plan);
  if (plan->hotplug_cores != NULL)
    add_hotplug_json(b, plan);
  qp_json_add_strings(b, "reasons", plan->reasons);
  qp_json_add_strings(b, "warnings", plan->warnings);
  json_builder_end_object(b);
  return json_builder_get_root(b);
}

/* ---- The ledger's status ------------------------------------------------- */

/* "cache-domains" of node ID with their usage. */
static void
add_cache_usage(const QpHost *host, hwloc_const_bitmap_t dedicated,
                const double *load, int id, JsonBuilder *b)
{
  json_builder_set_member_name(b, "cache-domains");
  json_builder_begin_array(b);
  for (guint d = 0; d < host->n_domains; d++) {
    const QpCacheDomain *cd = &host->domains[d];
    if (cd->node != id)
      continue;
    QpCacheUsage u;
    qp_cache_usage(host, dedicated, load, d, &u);
    json_builder_begin_object(b);
    qp_json_add_string(b, "level", qp_cache_level_name(cd->level));
    qp_json_add_list(b, "cpus", cd->cpus);
    qp_json_add_int(b, "cores", cd->n_cores);
    qp_json_add_int(b, "dedicated-cores", u.dedicated_cores);
    json_builder_set_member_name(b, "shared-vcpus");
    json_builder_add_double_value(b, u.shared_vcpus);
    json_builder_set_member_name(b, "vcpus-per-cpu");
    json_builder_add_double_value(b, u.per_cpu);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
}

static void
add_node_json(JsonBuilder *b, const QpHost *host, const QpClaims *claims,
              const QpPlacementOptions *opts, const double *load, guint index)
{
  const QpNode *n = &host->nodes[index];
  QpNodeCapacity cap;
  qp_node_capacity(host, claims, opts, index, &cap);

  json_builder_begin_object(b);
  qp_json_add_int(b, "id", (gint64)n->id);
  json_builder_set_member_name(b, "memory-mib");
  json_builder_begin_object(b);
  qp_json_add_int(b, "total", cap.total_mib);
  qp_json_add_int(b, "hugepage-pools", cap.hugepage_mib);
  qp_json_add_int(b, "reserve", cap.reserve_mib);
  qp_json_add_int(b, "claimed", cap.claimed_mib);
  qp_json_add_int(b, "uncommitted", cap.uncommitted_mib);
  /* Seed 003's view (docs/ledger.md, "Memory the node really has"). */
  qp_json_add_int(b, "outside-claims", cap.outside_mib);
  qp_json_add_int(b, "outstanding",
                  cap.measured ? cap.outstanding_mib : cap.claimed_mib);
  if (cap.measured)
    qp_json_add_int(b, "kernel-can-give", cap.can_give_mib);
  qp_json_add_int(b, "available", cap.uncommitted_mib);
  json_builder_end_object(b);
  json_builder_set_member_name(b, "blocked");
  json_builder_add_boolean_value(b, cap.blocked);

  json_builder_set_member_name(b, "hugepages");
  json_builder_begin_array(b);
  g_autoptr(GArray) sizes = qp_node_page_sizes(n, claims);
  for (guint i = 0; i < sizes->len; i++) {
    guint64 kib = g_array_index(sizes, guint64, i);
    QpNodePages pages;
    qp_node_pages(host, claims, index, kib, &pages);
    json_builder_begin_object(b);
    qp_json_add_int(b, "page-kib", kib);
    qp_json_add_int(b, "total", pages.total);
    qp_json_add_int(b, "free", pages.free);
    qp_json_add_int(b, "claimed", pages.claimed);
    qp_json_add_int(b, "uncommitted",
                    qp_node_uncommitted(host, claims, opts, index, kib));
    json_builder_end_object(b);
  }
  json_builder_end_array(b);

  qp_json_add_list(b, "cpus", n->cpus);
  qp_json_add_list(b, "dedicated-cpus", cap.dedicated);
  qp_json_add_int(b, "shared-vcpus", cap.shared_vcpus);
  json_builder_set_member_name(b, "load-per-cpu");
  json_builder_add_double_value(b, qp_status_load_per_cpu(host, n, &cap, load));
  g_auto(hwloc_bitmap_t) on_dedicated =
      qp_status_shared_dedicated(host, load, cap.dedicated, n->all_cpus);
  qp_json_add_list(b, "shared-dedicated-cpus", on_dedicated);
  g_auto(hwloc_bitmap_t) over = hwloc_bitmap_alloc();
  g_autoptr(GArray) groups =
      qp_status_load_groups(host, n, load, cap.dedicated, over);
  json_builder_set_member_name(b, "cpu-load");
  json_builder_begin_array(b);
  for (guint g = 0; g < groups->len; g++) {
    const QpLoadGroup *lg = &g_array_index(groups, QpLoadGroup, g);
    json_builder_begin_object(b);
    qp_json_add_list(b, "cpus", lg->cpus);
    json_builder_set_member_name(b, "vcpus-per-cpu");
    json_builder_add_double_value(b, lg->per_cpu);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  qp_json_add_list(b, "overcommitted-cpus", over);
  g_auto(hwloc_bitmap_t) dedicated = qp_claims_dedicated(claims);
  add_cache_usage(host, dedicated, load, n->id, b);
  json_builder_end_object(b);
  qp_node_capacity_clear(&cap);
}

/* "dedicated-shared-with": the other VMs whose shared vCPUs float on the
 * dedicated CPUs of claims->claims[INDEX], with those CPUs. */
static void
add_sharers_json(JsonBuilder *b, const QpHost *host, const QpClaims *claims,
                 guint index)
{
  g_autoptr(GArray) sharers = qp_status_sharers(host, claims, index);
  json_builder_set_member_name(b, "dedicated-shared-with");
  json_builder_begin_array(b);
  for (guint i = 0; i < sharers->len; i++) {
    const QpSharer *sh = &g_array_index(sharers, QpSharer, i);
    json_builder_begin_object(b);
    qp_json_add_string(b, "id", sh->with->id);
    qp_json_add_string(b, "name", sh->with->name);
    qp_json_add_list(b, "cpus", sh->cpus);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
}

static void
add_vm_json(JsonBuilder *b, const QpHost *host, const QpClaims *claims,
            guint index)
{
  const QpClaim *c = claims->claims->pdata[index];
  json_builder_begin_object(b);
  qp_json_add_string(b, "id", c->id);
  qp_json_add_string(b, "name", c->name);
  if (c->uuid != NULL)
    qp_json_add_string(b, "uuid", c->uuid);
  qp_json_add_int(b, "qemu-pid", (gint64)MAX(c->qemu_pid, 0));
  if (c->launcher_pid > 0)
    qp_json_add_int(b, "launcher-pid", (gint64)c->launcher_pid);
  qp_json_add_int(b, "keeper-pid", (gint64)MAX(c->keeper_pid, 0));
  json_builder_set_member_name(b, "keeper-running");
  json_builder_add_boolean_value(b, qp_status_keeper_running(c));
  qp_json_add_string(b, "mode", qp_mode_name(c->mode));
  json_builder_set_member_name(b, "best-effort");
  json_builder_add_boolean_value(b, c->best_effort);
  json_builder_set_member_name(b, "caller-placed");
  json_builder_add_boolean_value(b, c->caller_placed);
  qp_json_add_holdings(b, c->mem, c->huge, c->dedicated, c->load, c->cpu_load);
  add_sharers_json(b, host, claims, index);
  qp_json_add_int(b, "since", c->time);
  qp_json_add_strings(b, "devices", c->devices);
  json_builder_end_object(b);
}

JsonNode *
qp_status_to_json(const QpHost *host, const QpClaims *claims,
                  const QpPlacementOptions *opts)
{
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "nodes");
  json_builder_begin_array(b);
  g_autofree double *load = host ? qp_claims_cpu_load(host, claims) : NULL;
  for (guint i = 0; host && i < host->n_nodes; i++)
    add_node_json(b, host, claims, opts, load, i);
  json_builder_end_array(b);
  json_builder_set_member_name(b, "vms");
  json_builder_begin_array(b);
  for (guint i = 0; claims && i < claims->claims->len; i++)
    add_vm_json(b, host, claims, i);
  json_builder_end_array(b);
  json_builder_set_member_name(b, "ignored");
  json_builder_begin_array(b);
  for (guint i = 0; claims && i < claims->ignored->len; i++) {
    const QpIgnoredRecord *r = claims->ignored->pdata[i];
    json_builder_begin_object(b);
    qp_json_add_string(b, "file", r->file);
    qp_json_add_int(b, "owner", (gint64)r->owner);
    qp_json_add_string(b, "reason", r->reason);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  json_builder_set_member_name(b, "warnings");
  json_builder_begin_array(b);
  for (guint i = 0; claims && i < claims->warnings->len; i++)
    qp_json_add_string_value(b, claims->warnings->pdata[i]);
  g_autoptr(GPtrArray) over = qp_status_overcommitted(host, claims, opts);
  for (guint i = 0; i < over->len; i++)
    qp_json_add_string_value(b, over->pdata[i]);
  json_builder_end_array(b);
  json_builder_end_object(b);
  return json_builder_get_root(b);
}

JsonNode *
qp_moves_to_json(const GPtrArray *moves)
{
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_array(b);
  for (guint i = 0; moves != NULL && i < moves->len; i++) {
    const QpMove *m = moves->pdata[i];
    json_builder_begin_object(b);
    qp_json_add_string(b, "vm", m->vm);
    qp_json_add_list(b, "from", m->from);
    qp_json_add_list(b, "to", m->to);
    qp_json_add_int(b, "mib", (gint64)m->mib);
    if (m->relieves >= 0)
      qp_json_add_int(b, "relieves", m->relieves);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  return json_builder_get_root(b);
}

void
qp_status_json_add_moves(JsonNode *status, const GPtrArray *moves)
{
  JsonObject *r = json_object_new();
  json_object_set_member(r, "moves", qp_moves_to_json(moves));
  json_object_set_object_member(json_node_get_object(status), "rebalance", r);
}
