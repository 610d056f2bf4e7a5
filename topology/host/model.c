/* The host model's queries (see host.h): plain data once built, so that
 * nothing here touches hwloc. */
#include "topology/host/host.h"

#include <string.h>

#include "topology/host/cache-domains.h"

void
qp_host_set_distances(QpHost *host, const guint *matrix)
{
  memcpy(host->distance, matrix, sizeof(guint) * host->n_nodes * host->n_nodes);
}

void
qp_host_free(QpHost *host)
{
  if (host == NULL)
    return;
  g_free(host->source);
  for (guint i = 0; host->nodes != NULL && i < host->n_nodes; i++) {
    hwloc_bitmap_free(host->nodes[i].cpus);
    hwloc_bitmap_free(host->nodes[i].all_cpus);
    if (host->nodes[i].hugepages != NULL)
      g_array_unref(host->nodes[i].hugepages);
  }
  g_free(host->nodes);
  for (guint i = 0; host->cores != NULL && i < host->n_cores; i++)
    hwloc_bitmap_free(host->cores[i].pus);
  g_free(host->cores);
  g_free(host->cpus);
  g_free(host->distance);
  hwloc_bitmap_free(host->allowed);
  hwloc_bitmap_free(host->allowed_nodes);
  hwloc_bitmap_free(host->beyond_affinity);
  hwloc_bitmap_free(host->mem_denied);
  if (host->pci != NULL) {
    for (guint i = 0; i < host->pci->len; i++)
      g_free(g_array_index(host->pci, QpPciDevice, i).bdf);
    g_array_unref(host->pci);
  }
  qp_host_free_cache_domains(host);
  g_strfreev(host->kind_names);
  g_free(host->kind_efficiency);
  g_free(host->inconsistent);
  g_free(host);
}

int
qp_host_node_index(const QpHost *host, int id)
{
  for (guint i = 0; i < host->n_nodes; i++)
    if (host->nodes[i].id == id)
      return (int)i;
  return -1;
}

gboolean
qp_host_node_mem_denied(const QpHost *host, int id)
{
  return host->mem_denied != NULL && id >= 0 &&
         hwloc_bitmap_isset(host->mem_denied, (unsigned)id);
}

int
qp_host_cpu_index(const QpHost *host, int id)
{
  guint lo = 0, hi = host->n_cpus;
  while (lo < hi) {
    guint mid = lo + (hi - lo) / 2;
    if (host->cpus[mid].id == id)
      return (int)mid;
    if (host->cpus[mid].id < id)
      lo = mid + 1;
    else
      hi = mid;
  }
  return -1;
}

hwloc_bitmap_t
qp_host_kind_cpus(const QpHost *host, guint k)
{
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  for (guint c = 0; c < host->n_cpus; c++)
    if (host->cpus[c].kind == (int)k)
      hwloc_bitmap_set(set, (unsigned)host->cpus[c].id);
  return set;
}

guint
qp_host_distance_at(const QpHost *host, guint i, guint j)
{
  if (host->distance == NULL)
    return i == j ? QP_DISTANCE_LOCAL : QP_DISTANCE_REMOTE;
  return host->distance[i * host->n_nodes + j];
}

guint
qp_host_distance(const QpHost *host, int a, int b)
{
  int i = qp_host_node_index(host, a), j = qp_host_node_index(host, b);
  if (i < 0 || j < 0)
    return a == b ? QP_DISTANCE_LOCAL : QP_DISTANCE_REMOTE;
  return qp_host_distance_at(host, (guint)i, (guint)j);
}

const QpPciDevice *
qp_host_find_pci(const QpHost *host, const char *bdf)
{
  if (host->pci == NULL)
    return NULL;
  for (guint i = 0; i < host->pci->len; i++) {
    const QpPciDevice *d = &g_array_index(host->pci, QpPciDevice, i);
    if (d->bdf != NULL && g_ascii_strcasecmp(d->bdf, bdf) == 0)
      return d;
  }
  /* "3b:00.0" without the domain */
  if (strlen(bdf) == 7) {
    g_autofree char *full = g_strdup_printf("0000:%s", bdf);
    return qp_host_find_pci(host, full);
  }
  return NULL;
}
