/* Cache domains: hwloc's L3 and L2 caches that more than one core shares,
 * each kept when its CPUs lie inside one NUMA node. */
#include "topology/host/cache-domains.h"

static gint
compare_domain(gconstpointer a, gconstpointer b)
{
  const QpCacheDomain *x = a, *y = b;
  if (x->node != y->node)
    return (x->node > y->node) - (x->node < y->node);
  if (x->level != y->level)
    return (x->level > y->level) - (x->level < y->level);
  int fx = hwloc_bitmap_first(x->cpus), fy = hwloc_bitmap_first(y->cpus);
  return (fx > fy) - (fx < fy);
}

/* The node whose CPUs hold every CPU of SET, or -1. */
static int
node_holding(const QpHost *host, hwloc_const_bitmap_t set)
{
  for (guint i = 0; i < host->n_nodes; i++)
    if (!hwloc_bitmap_iszero(host->nodes[i].all_cpus) &&
        hwloc_bitmap_isincluded(set, host->nodes[i].all_cpus))
      return host->nodes[i].id;
  return -1;
}

/* The cores of HOST with a PU in SET. */
static guint
cores_in(const QpHost *host, hwloc_const_bitmap_t set)
{
  guint n = 0;
  for (guint c = 0; c < host->n_cores; c++)
    n += hwloc_bitmap_intersects(host->cores[c].pus, set);
  return n;
}

static void
add_level(const QpHost *host, hwloc_topology_t topo, hwloc_obj_type_t type,
          int level, GArray *out)
{
  g_auto(hwloc_bitmap_t) cpus = hwloc_bitmap_alloc();
  for (hwloc_obj_t o = hwloc_get_next_obj_by_type(topo, type, NULL); o != NULL;
       o = hwloc_get_next_obj_by_type(topo, type, o)) {
    if (o->attr->cache.type == HWLOC_OBJ_CACHE_INSTRUCTION || o->cpuset == NULL)
      continue;
    /* Every PU of the cache, allowed or not: the model's CPUs. */
    hwloc_bitmap_zero(cpus);
    for (guint c = 0; c < host->n_cpus; c++)
      if (hwloc_bitmap_isset(o->cpuset, (unsigned)host->cpus[c].id))
        hwloc_bitmap_set(cpus, (unsigned)host->cpus[c].id);
    guint n_cores = cores_in(host, cpus);
    int node = node_holding(host, cpus);
    /* A cache of one core shares nothing (a VM's per-core L3). */
    if (n_cores < 2 || node < 0)
      continue;
    QpCacheDomain d = {
        .level = level,
        .node = node,
        .size_kib = o->attr->cache.size / 1024,
        .cpus = hwloc_bitmap_dup(cpus),
        .n_cores = n_cores,
    };
    g_array_append_val(out, d);
  }
}

void
qp_host_fill_cache_domains(QpHost *host, hwloc_topology_t topo)
{
  GArray *all = g_array_new(FALSE, TRUE, sizeof(QpCacheDomain));
  add_level(host, topo, HWLOC_OBJ_L3CACHE, QP_CACHE_L3, all);
  add_level(host, topo, HWLOC_OBJ_L2CACHE, QP_CACHE_L2, all);
  g_array_sort(all, compare_domain);
  host->n_domains = all->len;
  host->domains = (QpCacheDomain *)(void *)g_array_free(all, FALSE);
  for (guint c = 0; c < host->n_cores; c++) {
    QpCore *core = &host->cores[c];
    for (int l = 0; l < QP_CACHE_LEVELS; l++)
      core->domain[l] = -1;
    for (guint d = 0; d < host->n_domains; d++)
      if (hwloc_bitmap_intersects(host->domains[d].cpus, core->pus))
        core->domain[host->domains[d].level] = (int)d;
  }
}

void
qp_host_free_cache_domains(QpHost *host)
{
  for (guint d = 0; host->domains != NULL && d < host->n_domains; d++)
    hwloc_bitmap_free(host->domains[d].cpus);
  g_clear_pointer(&host->domains, g_free);
  host->n_domains = 0;
}

const char *
qp_cache_level_name(int level)
{
  return level == QP_CACHE_L3 ? "L3" : "L2";
}
