/* `qemu-pin status`: what the ledger holds, per host node and per VM, as
 * JSON for machines and as text for people. Pure functions of (host,
 * claims, options): the caller reads the ledger. */
#include "topology/status.h"

#include "topology/cache-domains.h"
#include "topology/capacity.h"
#include "topology/base/json.h"
#include "topology/ledger.h"

#define BAR_COLUMNS 40

static double
load_per_cpu(const QpNodeCapacity *cap)
{
  return cap->shared_cpus > 0 ? (double)cap->shared_vcpus / cap->shared_cpus
                              : 0.0;
}

/* Shared vCPUs per CPU, rounded to hundredths as they are shown. */
static double
cpu_load_of(const QpHost *host, const double *load, int id)
{
  int i = qp_host_cpu_index(host, id);
  return i >= 0 ? (double)(gint64)(load[i] * 100 + 0.5) / 100 : 0.0;
}

/* CPUs of a node that carry the same shared load. */
typedef struct {
  hwloc_bitmap_t cpus;
  double per_cpu;
} LoadGroup;

static void
load_group_clear(gpointer p)
{
  g_clear_pointer(&((LoadGroup *)p)->cpus, hwloc_bitmap_free);
}

/* The CPUs of node N that carry shared vCPUs (LOAD from
 * qp_claims_cpu_load()), grouped by load in the order of their first CPU;
 * OVER gets those with more than one vCPU per CPU. */
static GArray *
node_load_groups(const QpHost *host, const QpNode *n, const double *load,
                 hwloc_bitmap_t over)
{
  GArray *groups = g_array_new(FALSE, TRUE, sizeof(LoadGroup));
  g_array_set_clear_func(groups, load_group_clear);
  if (n->all_cpus == NULL)
    return groups;
  int cpu;
  hwloc_bitmap_foreach_begin(cpu, n->all_cpus)
  {
    double l = cpu_load_of(host, load, cpu);
    if (l <= 0.0)
      continue;
    if (l > 1.0)
      hwloc_bitmap_set(over, (unsigned)cpu);
    guint g = 0;
    while (g < groups->len && g_array_index(groups, LoadGroup, g).per_cpu != l)
      g++;
    if (g == groups->len) {
      LoadGroup e = {hwloc_bitmap_alloc(), l};
      g_array_append_val(groups, e);
    }
    hwloc_bitmap_set(g_array_index(groups, LoadGroup, g).cpus, (unsigned)cpu);
  }
  hwloc_bitmap_foreach_end();
  return groups;
}

/* ---- JSON -----------------------------------------------------------------
 */

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
  json_builder_add_double_value(b, load_per_cpu(&cap));
  g_auto(hwloc_bitmap_t) over = hwloc_bitmap_alloc();
  g_autoptr(GArray) groups = node_load_groups(host, n, load, over);
  json_builder_set_member_name(b, "cpu-load");
  json_builder_begin_array(b);
  for (guint g = 0; g < groups->len; g++) {
    const LoadGroup *lg = &g_array_index(groups, LoadGroup, g);
    json_builder_begin_object(b);
    qp_json_add_list(b, "cpus", lg->cpus);
    json_builder_set_member_name(b, "vcpus-per-cpu");
    json_builder_add_double_value(b, lg->per_cpu);
    json_builder_end_object(b);
  }
  json_builder_end_array(b);
  qp_json_add_list(b, "overcommitted-cpus", over);
  g_auto(hwloc_bitmap_t) dedicated = qp_claims_dedicated(claims);
  qp_cache_usage_to_json(host, dedicated, load, n->id, b);
  json_builder_end_object(b);
  qp_node_capacity_clear(&cap);
}

static void
add_vm_json(JsonBuilder *b, const QpClaim *c)
{
  json_builder_begin_object(b);
  qp_json_add_string(b, "id", c->id);
  qp_json_add_string(b, "name", c->name);
  if (c->uuid != NULL)
    qp_json_add_string(b, "uuid", c->uuid);
  qp_json_add_int(b, "qemu-pid", (gint64)MAX(c->qemu_pid, 0));
  if (c->launcher_pid > 0)
    qp_json_add_int(b, "launcher-pid", (gint64)c->launcher_pid);
  qp_json_add_int(b, "keeper-pid", (gint64)MAX(c->keeper_pid, 0));
  qp_json_add_string(b, "mode", qp_mode_name(c->mode));
  json_builder_set_member_name(b, "best-effort");
  json_builder_add_boolean_value(b, c->best_effort);
  qp_json_add_holdings(b, c->mem, c->huge, c->dedicated, c->load, c->cpu_load);
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
    add_vm_json(b, claims->claims->pdata[i]);
  json_builder_end_array(b);
  json_builder_set_member_name(b, "warnings");
  json_builder_begin_array(b);
  for (guint i = 0; claims && i < claims->warnings->len; i++)
    json_builder_add_string_value(b, claims->warnings->pdata[i]);
  json_builder_end_array(b);
  json_builder_end_object(b);
  return json_builder_get_root(b);
}

/* ---- Text -----------------------------------------------------------------
 */

static guint
columns(guint64 part, guint64 total)
{
  if (total == 0)
    return 0;
  /* Round to nearest, but never show a non-zero part as empty. */
  guint64 c = (part * BAR_COLUMNS + total / 2) / total;
  if (c == 0 && part > 0)
    c = 1;
  return (guint)MIN(c, (guint64)BAR_COLUMNS);
}

static void
append_bar(GString *s, const QpNodeCapacity *cap)
{
  guint claimed = columns(cap->claimed_mib, cap->total_mib);
  guint reserve = columns(cap->reserve_mib, cap->total_mib);
  guint huge = columns(cap->hugepage_mib, cap->total_mib);
  if (claimed + reserve > BAR_COLUMNS)
    reserve = BAR_COLUMNS - claimed;
  if (claimed + reserve + huge > BAR_COLUMNS)
    huge = BAR_COLUMNS - claimed - reserve;
  g_string_append(s, "  memory [");
  for (guint i = 0; i < BAR_COLUMNS; i++) {
    char ch = '.';
    if (cap->blocked)
      ch = 'X';
    else if (i < claimed)
      ch = '#';
    else if (i < claimed + reserve)
      ch = '+';
    else if (i < claimed + reserve + huge)
      ch = 'h';
    g_string_append_c(s, ch);
  }
  g_string_append(s, cap->blocked ? "]  X blocked\n"
                     : huge > 0   ? "]  # claimed, + host reserve, h "
                                    "hugepage pools, . free\n"
                                  : "]  # claimed, + host reserve, . free\n");
}

static void
append_cpus(GString *s, const QpHost *host, const QpNode *n,
            const QpNodeCapacity *cap, const double *load)
{
  if (n->all_cpus == NULL || hwloc_bitmap_iszero(n->all_cpus))
    return;
  g_autofree char *list = qp_list_format(n->all_cpus);
  g_string_append_printf(s, "  cpus %s [", list);
  int cpu;
  hwloc_bitmap_foreach_begin(cpu, n->all_cpus)
  {
    double l = cpu_load_of(host, load, cpu);
    char ch = '.';
    if (hwloc_bitmap_isset(cap->dedicated, (unsigned)cpu))
      ch = 'D';
    else if (l > 1.0)
      ch = 'O';
    else if (l > 0.0)
      ch = 'S';
    else if (n->cpus == NULL || !hwloc_bitmap_isset(n->cpus, (unsigned)cpu))
      ch = '-';
    g_string_append_c(s, ch);
  }
  hwloc_bitmap_foreach_end();
  g_auto(hwloc_bitmap_t) over = hwloc_bitmap_alloc();
  g_autoptr(GArray) groups = node_load_groups(host, n, load, over);
  g_string_append_printf(s,
                         "]  D dedicated, S shared (%u vCPUs, %.2f per CPU), "
                         "%s. free, - not usable\n",
                         cap->shared_vcpus, load_per_cpu(cap),
                         hwloc_bitmap_iszero(over)
                             ? ""
                             : "O overcommitted (more vCPUs than CPUs), ");
  if (groups->len == 0)
    return;
  g_string_append(s, "  shared vCPUs per CPU:");
  for (guint g = 0; g < groups->len; g++) {
    const LoadGroup *lg = &g_array_index(groups, LoadGroup, g);
    g_autofree char *cl = qp_list_format(lg->cpus);
    g_string_append_printf(s, "%s %.2f on %s", g ? "," : "", lg->per_cpu, cl);
  }
  if (!hwloc_bitmap_iszero(over)) {
    g_autofree char *ol = qp_list_format(over);
    g_string_append_printf(s, "; overcommitted %s", ol);
  }
  g_string_append_c(s, '\n');
}

static void
append_vm(GString *s, const QpClaim *c)
{
  g_autoptr(GDateTime) t = g_date_time_new_from_unix_utc(c->time);
  g_autofree char *since =
      t ? g_date_time_format(t, "%Y-%m-%d %H:%M:%S UTC") : g_strdup("?");
  g_string_append_printf(s, "  %s  %s  qemu pid %d", c->name ? c->name : "-",
                         c->id, c->qemu_pid);
  if (c->launcher_pid > 0)
    g_string_append_printf(s, ", launcher pid %d", c->launcher_pid);
  g_string_append_printf(s, ", keeper pid %d, mode %s%s, since %s\n",
                         c->keeper_pid, qp_mode_name(c->mode),
                         c->best_effort ? " (best effort)" : "", since);
  g_string_append(s, "    memory");
  if (c->mem->len == 0)
    g_string_append(s, " none");
  for (guint i = 0; i < c->mem->len; i++) {
    const QpNodeAmount *a = &g_array_index(c->mem, QpNodeAmount, i);
    g_string_append_printf(s, "%s node %d %" G_GUINT64_FORMAT " MiB",
                           i ? "," : "", a->node, a->mib);
  }
  for (guint i = 0; i < c->huge->len; i++) {
    const QpHugeClaim *h = &g_array_index(c->huge, QpHugeClaim, i);
    g_string_append_printf(s,
                           "; hugepages node %d %" G_GUINT64_FORMAT
                           " x %" G_GUINT64_FORMAT " KiB",
                           h->node, h->pages, h->page_kib);
  }
  if (!hwloc_bitmap_iszero(c->dedicated)) {
    g_autofree char *list = qp_list_format(c->dedicated);
    g_string_append_printf(s, "; dedicated cpus %s", list);
  }
  for (guint i = 0; i < c->load->len; i++) {
    const QpNodeLoad *l = &g_array_index(c->load, QpNodeLoad, i);
    g_string_append_printf(s, "; %u shared vCPUs on node %d", l->vcpus,
                           l->node);
  }
  /* Where a best-effort VM's vCPUs share CPUs (others float on their
   * nodes, as the node lines show). */
  for (guint i = 0; c->best_effort && i < c->cpu_load->len; i++) {
    const QpCpuLoad *l = &g_array_index(c->cpu_load, QpCpuLoad, i);
    g_autofree char *list = qp_list_format(l->cpus);
    g_string_append_printf(s, "; %u vCPUs float on cpus %s", l->vcpus, list);
  }
  g_string_append_c(s, '\n');
  for (guint i = 0; i < c->devices->len; i++)
    g_string_append_printf(s, "    device %s\n",
                           (const char *)c->devices->pdata[i]);
}

char *
qp_status_to_text(const QpHost *host, const QpClaims *claims,
                  const QpPlacementOptions *opts)
{
  GString *s = g_string_new(NULL);
  g_autofree double *load = host ? qp_claims_cpu_load(host, claims) : NULL;
  for (guint i = 0; host && i < host->n_nodes; i++) {
    const QpNode *n = &host->nodes[i];
    QpNodeCapacity cap;
    qp_node_capacity(host, claims, opts, i, &cap);
    g_autofree char *pools =
        cap.hugepage_mib > 0
            ? g_strdup_printf(" (%" G_GUINT64_FORMAT " in hugepage pools)",
                              cap.hugepage_mib)
            : g_strdup("");
    g_string_append_printf(
        s,
        "node %d: %" G_GUINT64_FORMAT " MiB total%s, %" G_GUINT64_FORMAT
        " reserved, %" G_GUINT64_FORMAT " claimed, %" G_GUINT64_FORMAT
        " free%s\n",
        n->id, cap.total_mib, pools, cap.reserve_mib, cap.claimed_mib,
        cap.uncommitted_mib,
        cap.blocked ? " (blocked by an unreadable record)" : "");
    append_bar(s, &cap);
    g_autoptr(GArray) sizes = qp_node_page_sizes(n, claims);
    for (guint j = 0; j < sizes->len; j++) {
      guint64 kib = g_array_index(sizes, guint64, j);
      QpNodePages pages;
      qp_node_pages(host, claims, i, kib, &pages);
      g_string_append_printf(
          s,
          "  hugepages %" G_GUINT64_FORMAT " KiB: %" G_GUINT64_FORMAT
          " total, %" G_GUINT64_FORMAT " free, %" G_GUINT64_FORMAT " claimed\n",
          kib, pages.total, pages.free, pages.claimed);
    }
    append_cpus(s, host, n, &cap, load);
    g_auto(hwloc_bitmap_t) dedicated = qp_claims_dedicated(claims);
    qp_cache_usage_to_text(host, dedicated, load, n->id, s);
    qp_node_capacity_clear(&cap);
  }

  guint n_vms = claims ? claims->claims->len : 0;
  if (n_vms == 0)
    g_string_append(s, "no VM holds a claim\n");
  else
    g_string_append_printf(s, "%u VM%s holding claims:\n", n_vms,
                           n_vms == 1 ? "" : "s");
  for (guint i = 0; i < n_vms; i++)
    append_vm(s, claims->claims->pdata[i]);

  for (guint i = 0; claims && i < claims->warnings->len; i++)
    g_string_append_printf(s, "warning: %s\n",
                           (const char *)claims->warnings->pdata[i]);
  return g_string_free(s, FALSE);
}
