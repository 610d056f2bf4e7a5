/* What the status views count beyond the nodes' capacity (see usage.h). */
#include "topology/status/usage.h"

#include <string.h>

#include "topology/base/proc.h"

static double
hundredths(double v)
{
  return (double)(gint64)(v * 100 + 0.5) / 100;
}

double
qp_status_cpu_load_of(const QpHost *host, const double *load, int id)
{
  int i = qp_host_cpu_index(host, id);
  return i >= 0 && load != NULL ? hundredths(load[i]) : 0.0;
}

double
qp_status_cpu_vcpus(const QpHost *host, const double *load,
                    hwloc_const_bitmap_t dedicated, int id)
{
  double own = dedicated != NULL && hwloc_bitmap_isset(dedicated, (unsigned)id)
                   ? 1.0
                   : 0.0;
  return qp_status_cpu_load_of(host, load, id) + own;
}

hwloc_bitmap_t
qp_status_shared_dedicated(const QpHost *host, const double *load,
                           hwloc_const_bitmap_t dedicated,
                           hwloc_const_bitmap_t set)
{
  hwloc_bitmap_t out = hwloc_bitmap_alloc();
  if (set == NULL || dedicated == NULL)
    return out;
  int cpu;
  hwloc_bitmap_foreach_begin(cpu, set)
  {
    if (hwloc_bitmap_isset(dedicated, (unsigned)cpu) &&
        qp_status_cpu_load_of(host, load, cpu) > 0.0)
      hwloc_bitmap_set(out, (unsigned)cpu);
  }
  hwloc_bitmap_foreach_end();
  return out;
}

double
qp_status_load_per_cpu(const QpHost *host, const QpNode *n,
                       const QpNodeCapacity *cap, const double *load)
{
  g_auto(hwloc_bitmap_t) shared =
      qp_status_shared_dedicated(host, load, cap->dedicated, n->all_cpus);
  int k = hwloc_bitmap_weight(shared);
  guint cpus = cap->shared_cpus + (guint)MAX(k, 0);
  return cpus > 0 ? (double)(cap->shared_vcpus + (guint)MAX(k, 0)) / cpus : 0.0;
}

static void
load_group_clear(gpointer p)
{
  g_clear_pointer(&((QpLoadGroup *)p)->cpus, hwloc_bitmap_free);
}

GArray *
qp_status_load_groups(const QpHost *host, const QpNode *n, const double *load,
                      hwloc_const_bitmap_t dedicated, hwloc_bitmap_t over)
{
  GArray *groups = g_array_new(FALSE, TRUE, sizeof(QpLoadGroup));
  g_array_set_clear_func(groups, load_group_clear);
  if (n->all_cpus == NULL)
    return groups;
  int cpu;
  hwloc_bitmap_foreach_begin(cpu, n->all_cpus)
  {
    if (qp_status_cpu_load_of(host, load, cpu) <= 0.0)
      continue;
    double l = qp_status_cpu_vcpus(host, load, dedicated, cpu);
    if (l > 1.0)
      hwloc_bitmap_set(over, (unsigned)cpu);
    guint g = 0;
    while (g < groups->len &&
           g_array_index(groups, QpLoadGroup, g).per_cpu != l)
      g++;
    if (g == groups->len) {
      QpLoadGroup e = {hwloc_bitmap_alloc(), l};
      g_array_append_val(groups, e);
    }
    hwloc_bitmap_set(g_array_index(groups, QpLoadGroup, g).cpus, (unsigned)cpu);
  }
  hwloc_bitmap_foreach_end();
  return groups;
}

void
qp_cache_usage(const QpHost *host, hwloc_const_bitmap_t dedicated,
               const double *load, guint d, QpCacheUsage *out)
{
  const QpCacheDomain *cd = &host->domains[d];
  *out = (QpCacheUsage){0};
  for (guint c = 0; c < host->n_cores; c++)
    if (hwloc_bitmap_isincluded(host->cores[c].pus, cd->cpus) &&
        hwloc_bitmap_intersects(host->cores[c].pus, dedicated))
      out->dedicated_cores++;
  guint cpus = 0, shared_dedicated = 0;
  int id;
  hwloc_bitmap_foreach_begin(id, cd->cpus)
  {
    int ci = qp_host_cpu_index(host, id);
    if (ci >= 0 && load != NULL)
      out->shared_vcpus += load[ci];
    if (!hwloc_bitmap_isset(dedicated, (unsigned)id))
      cpus++;
    else if (qp_status_cpu_load_of(host, load, id) > 0.0)
      shared_dedicated++;
  }
  hwloc_bitmap_foreach_end();
  /* Shown to hundredths, as the per-CPU load is. */
  out->shared_vcpus = hundredths(out->shared_vcpus);
  cpus += shared_dedicated;
  out->per_cpu = cpus > 0 ? (out->shared_vcpus + shared_dedicated) / cpus : 0.0;
}

static void
sharer_clear(gpointer p)
{
  g_clear_pointer(&((QpSharer *)p)->cpus, hwloc_bitmap_free);
}

GArray *
qp_status_sharers(const QpHost *host, const QpClaims *claims, guint index)
{
  GArray *out = g_array_new(FALSE, TRUE, sizeof(QpSharer));
  g_array_set_clear_func(out, sharer_clear);
  const QpClaim *mine = claims->claims->pdata[index];
  if (host == NULL || hwloc_bitmap_iszero(mine->dedicated))
    return out;
  g_auto(hwloc_bitmap_t) dedicated = qp_claims_dedicated(claims);
  g_autofree double *load = g_new0(double, MAX(host->n_cpus, 1));
  for (guint i = 0; i < claims->claims->len; i++) {
    const QpClaim *other = claims->claims->pdata[i];
    if (i == index)
      continue;
    memset(load, 0, sizeof(double) * MAX(host->n_cpus, 1));
    qp_claim_add_cpu_load(host, other, dedicated, load);
    QpSharer s = {other, qp_status_shared_dedicated(host, load, mine->dedicated,
                                                    mine->dedicated)};
    if (hwloc_bitmap_iszero(s.cpus))
      hwloc_bitmap_free(s.cpus);
    else
      g_array_append_val(out, s);
  }
  return out;
}

char *
qp_status_vm_words(const QpClaim *c)
{
  return c->name != NULL ? g_strdup_printf("%s (%s)", c->name, c->id)
                         : g_strdup(c->id);
}

char *
qp_status_ignored_words(const QpPlan *plan)
{
  const QpClaim *c = plan->ignored;
  if (c == NULL)
    return NULL;
  g_autofree char *who = qp_status_vm_words(c);
  return g_strdup_printf("%s, qemu pid %d: the running VM of this -%s, "
                         "planned as if it were not there",
                         who, c->qemu_pid,
                         g_strcmp0(plan->ignored_by, "name") == 0 ? "name"
                                                                  : "uuid");
}

gboolean
qp_status_keeper_running(const QpClaim *c)
{
  if (c->keeper_pid <= 0 || qp_proc_start_time(c->keeper_pid) == 0)
    return FALSE;
  g_autofree char *path = g_strdup_printf("/proc/%d/comm", c->keeper_pid);
  g_autofree char *comm = NULL;
  if (!g_file_get_contents(path, &comm, NULL, NULL))
    return FALSE;
  g_strchomp(comm);
  return strcmp(comm, "qemu-pin-keeper") == 0 || strcmp(comm, "qemu-pin") == 0;
}

/* "a, b": the VMs of CLAIMS that IN says hold something (names, else ids). */
static char *
vm_names(const QpClaims *claims,
         gboolean (*in)(const QpClaim *c, gconstpointer data),
         gconstpointer data)
{
  GString *s = g_string_new(NULL);
  for (guint i = 0; i < claims->claims->len; i++) {
    const QpClaim *c = claims->claims->pdata[i];
    if (in(c, data))
      g_string_append_printf(s, "%s%s", s->len ? ", " : "",
                             c->name != NULL ? c->name : c->id);
  }
  return g_string_free(s, FALSE);
}

static gboolean
has_mem_on(const QpClaim *c, gconstpointer data)
{
  int node = GPOINTER_TO_INT(data);
  for (guint i = 0; c->mem != NULL && i < c->mem->len; i++) {
    const QpNodeAmount *a = &g_array_index(c->mem, QpNodeAmount, i);
    if (a->node == node && a->mib > 0)
      return TRUE;
  }
  return FALSE;
}

typedef struct {
  int node;
  guint64 page_kib;
} PoolKey;

static gboolean
has_pages_on(const QpClaim *c, gconstpointer data)
{
  const PoolKey *k = data;
  for (guint i = 0; c->huge != NULL && i < c->huge->len; i++) {
    const QpHugeClaim *h = &g_array_index(c->huge, QpHugeClaim, i);
    if (h->node == k->node && h->page_kib == k->page_kib && h->pages > 0)
      return TRUE;
  }
  return FALSE;
}

static void
memory_overcommitted(const QpHost *host, const QpClaims *claims,
                     const QpPlacementOptions *opts, GPtrArray *out)
{
  for (guint i = 0; i < host->n_nodes; i++) {
    const QpNode *n = &host->nodes[i];
    QpNodeMemory mem;
    qp_node_memory(host, claims, opts, i, &mem);
    gboolean blocked = qp_claims_node_blocked(claims, n->id);
    guint64 excess = qp_node_memory_excess(&mem);
    if (!blocked && excess > 0) {
      g_autofree char *vms =
          vm_names(claims, has_mem_on, GINT_TO_POINTER(n->id));
      g_ptr_array_add(
          out, g_strdup_printf(
                   "node %d is overcommitted: its claims exceed its room by "
                   "%" G_GUINT64_FORMAT " MiB (%" G_GUINT64_FORMAT
                   " MiB claimed of %" G_GUINT64_FORMAT
                   " MiB of plain memory, %" G_GUINT64_FORMAT
                   " MiB of it reserved), by VMs %s",
                   n->id, excess, mem.claimed_mib, mem.plain_mib,
                   mem.reserve_mib, vms));
    }
    g_autoptr(GArray) sizes = qp_node_page_sizes(n, claims);
    for (guint j = 0; !blocked && j < sizes->len; j++) {
      PoolKey k = {n->id, g_array_index(sizes, guint64, j)};
      QpNodePages pages;
      qp_node_pages(host, claims, i, k.page_kib, &pages);
      if (pages.claimed <= pages.total)
        continue;
      g_autofree char *vms = vm_names(claims, has_pages_on, &k);
      g_ptr_array_add(
          out,
          g_strdup_printf("node %d's pool of %" G_GUINT64_FORMAT
                          " KiB hugepages is overcommitted: %" G_GUINT64_FORMAT
                          " pages claimed of %" G_GUINT64_FORMAT ", by VMs %s",
                          n->id, k.page_kib, pages.claimed, pages.total, vms));
    }
  }
}

static gboolean
has_dedicated(const QpClaim *c, gconstpointer data)
{
  return c->dedicated != NULL && hwloc_bitmap_intersects(c->dedicated, data);
}

static void
cpus_overcommitted(const QpClaims *claims, GPtrArray *out)
{
  g_auto(hwloc_bitmap_t) seen = hwloc_bitmap_alloc();
  g_auto(hwloc_bitmap_t) twice = hwloc_bitmap_alloc();
  for (guint i = 0; i < claims->claims->len; i++) {
    const QpClaim *c = claims->claims->pdata[i];
    if (c->dedicated == NULL)
      continue;
    g_auto(hwloc_bitmap_t) both = hwloc_bitmap_alloc();
    hwloc_bitmap_and(both, seen, c->dedicated);
    hwloc_bitmap_or(twice, twice, both);
    hwloc_bitmap_or(seen, seen, c->dedicated);
  }
  int cpu;
  hwloc_bitmap_foreach_begin(cpu, twice)
  {
    g_auto(hwloc_bitmap_t) one = hwloc_bitmap_alloc();
    hwloc_bitmap_set(one, (unsigned)cpu);
    g_autofree char *vms = vm_names(claims, has_dedicated, one);
    g_ptr_array_add(out, g_strdup_printf("CPU %d is dedicated to more than "
                                         "one VM: %s",
                                         cpu, vms));
  }
  hwloc_bitmap_foreach_end();
}

GPtrArray *
qp_status_overcommitted(const QpHost *host, const QpClaims *claims,
                        const QpPlacementOptions *opts)
{
  GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
  if (claims == NULL)
    return out;
  if (host != NULL)
    memory_overcommitted(host, claims, opts, out);
  cpus_overcommitted(claims, out);
  return out;
}
