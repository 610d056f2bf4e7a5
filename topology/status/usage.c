/* What the status views count beyond the nodes' capacity (see usage.h). */
#include "topology/status/usage.h"

double
qp_status_load_per_cpu(const QpNodeCapacity *cap)
{
  return cap->shared_cpus > 0 ? (double)cap->shared_vcpus / cap->shared_cpus
                              : 0.0;
}

double
qp_status_cpu_load_of(const QpHost *host, const double *load, int id)
{
  int i = qp_host_cpu_index(host, id);
  return i >= 0 ? (double)(gint64)(load[i] * 100 + 0.5) / 100 : 0.0;
}

static void
load_group_clear(gpointer p)
{
  g_clear_pointer(&((QpLoadGroup *)p)->cpus, hwloc_bitmap_free);
}

GArray *
qp_status_load_groups(const QpHost *host, const QpNode *n, const double *load,
                      hwloc_bitmap_t over)
{
  GArray *groups = g_array_new(FALSE, TRUE, sizeof(QpLoadGroup));
  g_array_set_clear_func(groups, load_group_clear);
  if (n->all_cpus == NULL)
    return groups;
  int cpu;
  hwloc_bitmap_foreach_begin(cpu, n->all_cpus)
  {
    double l = qp_status_cpu_load_of(host, load, cpu);
    if (l <= 0.0)
      continue;
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
