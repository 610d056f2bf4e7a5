/* Cache domains: hwloc's L3 and L2 caches that more than one core shares,
 * each kept when its CPUs lie inside one NUMA node. */
#include "topology/cache-domains.h"

#include "topology/base/json.h"

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

void
qp_cache_domains_to_json(const QpHost *host, int id, JsonBuilder *b)
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

static void
append_size(GString *s, guint64 kib)
{
  if (kib == 0)
    return;
  if (kib % 1024 == 0)
    g_string_append_printf(s, " (%" G_GUINT64_FORMAT " MiB)", kib / 1024);
  else
    g_string_append_printf(s, " (%" G_GUINT64_FORMAT " KiB)", kib);
}

void
qp_cache_domains_to_text(const QpHost *host, int id, GString *s)
{
  gboolean first = TRUE;
  for (guint d = 0; d < host->n_domains; d++) {
    const QpCacheDomain *cd = &host->domains[d];
    if (cd->node != id)
      continue;
    g_autofree char *cpus = qp_list_format(cd->cpus);
    if (first)
      g_string_append_printf(s, "node %d cache domains: ", id);
    g_string_append_printf(s, "%s%s %s", first ? "" : ", ",
                           qp_cache_level_name(cd->level), cpus);
    append_size(s, cd->size_kib);
    first = FALSE;
  }
  if (!first)
    g_string_append_c(s, '\n');
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
  guint free_cpus = 0;
  int id;
  hwloc_bitmap_foreach_begin(id, cd->cpus)
  {
    int ci = qp_host_cpu_index(host, id);
    if (ci >= 0 && load != NULL)
      out->shared_vcpus += load[ci];
    free_cpus += !hwloc_bitmap_isset(dedicated, (unsigned)id);
  }
  hwloc_bitmap_foreach_end();
  /* Shown to hundredths, as the per-CPU load is. */
  out->shared_vcpus = (double)(gint64)(out->shared_vcpus * 100 + 0.5) / 100;
  out->per_cpu = free_cpus > 0 ? out->shared_vcpus / free_cpus : 0.0;
}

void
qp_cache_usage_to_json(const QpHost *host, hwloc_const_bitmap_t dedicated,
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

void
qp_cache_usage_to_text(const QpHost *host, hwloc_const_bitmap_t dedicated,
                       const double *load, int id, GString *s)
{
  for (guint d = 0; d < host->n_domains; d++) {
    const QpCacheDomain *cd = &host->domains[d];
    if (cd->node != id || cd->level != QP_CACHE_L3)
      continue;
    QpCacheUsage u;
    qp_cache_usage(host, dedicated, load, d, &u);
    g_autofree char *cpus = qp_list_format(cd->cpus);
    g_string_append_printf(s,
                           "  L3 %s: %u of %u cores dedicated, %.2f shared "
                           "vCPUs (%.2f per CPU)\n",
                           cpus, u.dedicated_cores, cd->n_cores, u.shared_vcpus,
                           u.per_cpu);
  }
}
