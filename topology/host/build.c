/* The host model built from hwloc (live, recorded XML or synthetic): turned
 * into plain data once, so that the planner never touches hwloc objects.
 * What each field means and where it comes from is in host.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* CPU_ALLOC, sched_getaffinity */
#endif
#include "topology/host/host.h"

#include <errno.h>
#include <hwloc/plugins.h>
#include <numaif.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "topology/base/dir-file.h"
#include "topology/host/cache-domains.h"
#include "topology/host/node-memory.h"

G_DEFINE_AUTO_CLEANUP_FREE_FUNC(hwloc_topology_t, hwloc_topology_destroy, NULL)

#define QP_ISOLATED_PATH "/sys/devices/system/cpu/isolated"
#define QP_SYS_NODE "/sys/devices/system/node"
#define QP_SYS_HUGEPAGES "/sys/kernel/mm/hugepages"

typedef enum {
  SOURCE_LIVE,
  SOURCE_XML,
  SOURCE_SYNTHETIC,
} Source;

/* ---- hwloc helpers ---- */

/* Lowest-id NUMA node among the memory children of OBJ (memory-side
 * caches may sit between OBJ and its nodes), or NULL. */
static hwloc_obj_t
first_memory_node(hwloc_obj_t obj)
{
  hwloc_obj_t best = NULL;
  for (hwloc_obj_t m = obj->memory_first_child; m != NULL;
       m = m->next_sibling) {
    hwloc_obj_t n = m->type == HWLOC_OBJ_NUMANODE ? m : first_memory_node(m);
    if (n != NULL && (best == NULL || n->os_index < best->os_index))
      best = n;
  }
  return best;
}

/* The node a PU belongs to: the node attached nearest above it. */
static int
node_of_pu(hwloc_obj_t pu)
{
  for (hwloc_obj_t a = pu->parent; a != NULL; a = a->parent) {
    hwloc_obj_t n = first_memory_node(a);
    if (n != NULL)
      return (int)n->os_index;
  }
  return -1;
}

static int
package_of(hwloc_topology_t topo, hwloc_obj_t obj)
{
  hwloc_obj_t p = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, obj);
  return p != NULL ? (int)p->os_index : 0;
}

/* ---- live-host readers ---- */

static gboolean
read_isolated(hwloc_bitmap_t *out, GError **error)
{
  /* No such file, or an empty one: nothing is isolated. */
  return qp_list_read_file(QP_ISOLATED_PATH, out, error);
}

static gboolean
read_affinity(hwloc_bitmap_t out, GError **error)
{
  for (int ncpus = 1024; ncpus <= 1 << 20; ncpus *= 2) {
    cpu_set_t *set = CPU_ALLOC(ncpus);
    size_t size = CPU_ALLOC_SIZE(ncpus);
    CPU_ZERO_S(size, set);
    if (sched_getaffinity(0, size, set) == 0) {
      hwloc_bitmap_zero(out);
      for (int c = 0; c < ncpus; c++)
        if (CPU_ISSET_S(c, size, set))
          hwloc_bitmap_set(out, (unsigned)c);
      CPU_FREE(set);
      return TRUE;
    }
    int e = errno;
    CPU_FREE(set);
    if (e != EINVAL) {
      g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LOAD,
                  "cannot read this process's CPU affinity: %s", g_strerror(e));
      return FALSE;
    }
  }
  g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LOAD,
              "cannot read this process's CPU affinity: more than %d CPUs",
              1 << 20);
  return FALSE;
}

/* The nodes of the memory policy this process inherited when it is one
 * that keeps memory there (numactl --membind, --interleave, a caller's
 * set_mempolicy(MPOL_BIND)); NULL for the default, local or a preferred
 * node (whose memory may go elsewhere). QEMU alone allocates under that
 * policy, so it is the caller's choice of nodes as cpuset.mems is. */
static hwloc_bitmap_t
read_mempolicy(void)
{
  enum { MAX_NODES = 4096 };
  unsigned long mask[MAX_NODES / (8 * sizeof(unsigned long))] = {0};
  int mode = MPOL_DEFAULT;
  if (syscall(SYS_get_mempolicy, &mode, mask, (unsigned long)MAX_NODES, NULL,
              0UL) < 0 ||
      /* the mode, without its flags (MPOL_F_STATIC_NODES, ...) */
      ((mode & 0xff) != MPOL_BIND && (mode & 0xff) != MPOL_INTERLEAVE))
    return NULL;
  hwloc_bitmap_t nodes = hwloc_bitmap_alloc();
  for (unsigned n = 0; n < MAX_NODES; n++)
    if (mask[n / (8 * sizeof(unsigned long))] &
        (1UL << (n % (8 * sizeof(unsigned long)))))
      hwloc_bitmap_set(nodes, n);
  return nodes;
}

static gboolean
read_sys_u64(const char *path, guint64 *out)
{
  g_autofree char *text = qp_file_read_text(path, 4096);
  char *end = NULL;
  if (text == NULL)
    return FALSE;
  g_strstrip(text);
  guint64 v = g_ascii_strtoull(text, &end, 10);
  if (end == text || *end != '\0')
    return FALSE;
  *out = v;
  return TRUE;
}

/* ---- building the model ---- */

static gint
compare_pool(gconstpointer a, gconstpointer b)
{
  const QpHugePool *x = a, *y = b;
  return x->page_kib < y->page_kib ? -1 : x->page_kib > y->page_kib;
}

static gint
compare_pci(gconstpointer a, gconstpointer b)
{
  const QpPciDevice *x = a, *y = b;
  return strcmp(x->bdf, y->bdf);
}

static gint
compare_node(gconstpointer a, gconstpointer b)
{
  const QpNode *x = a, *y = b;
  return (x->id > y->id) - (x->id < y->id);
}

static void
fill_node(QpNode *n, hwloc_obj_t obj)
{
  const struct hwloc_numanode_attr_s *attr = &obj->attr->numanode;
  n->id = (int)obj->os_index;
  n->total_mib = attr->local_memory / (1024 * 1024);
  n->free_mib = n->total_mib;
  n->cpus = hwloc_bitmap_alloc();
  n->all_cpus = hwloc_bitmap_alloc();
  n->hugepages = g_array_new(FALSE, TRUE, sizeof(QpHugePool));

  /* Live, the node's own meminfo gives total and free a moment later
   * (qp_host_read_node_memory(), the same file libnuma's
   * numa_node_size64() would read once more here). */

  /* The smallest page type is the base page; the others are hugepages. */
  guint64 base = G_MAXUINT64;
  for (unsigned i = 0; i < attr->page_types_len; i++)
    if (attr->page_types[i].size != 0)
      base = MIN(base, attr->page_types[i].size);
  for (unsigned i = 0; i < attr->page_types_len; i++) {
    const guint64 size = attr->page_types[i].size;
    if (size == 0 || size == base)
      continue;
    QpHugePool pool = {
        .page_kib = size / 1024,
        .total = attr->page_types[i].count,
        .free = attr->page_types[i].count,
    };
    g_array_append_val(n->hugepages, pool);
  }
  g_array_sort(n->hugepages, compare_pool);
}

/* The host's pools of one page size, read once for all nodes. */
typedef struct {
  guint64 page_kib;
  gboolean empty; /* no page of this size on any node */
} HostPool;

/* Whether the host has no hugepage of PAGE_KIB at all: the host-wide
 * nr_hugepages, which counts every node's pages (surplus ones too), reads
 * 0. Looked up in POOLS, and read once where it is not there yet. */
static gboolean
host_pool_empty(GArray *pools, guint64 page_kib)
{
  for (guint i = 0; i < pools->len; i++)
    if (g_array_index(pools, HostPool, i).page_kib == page_kib)
      return g_array_index(pools, HostPool, i).empty;
  g_autofree char *path = g_strdup_printf(
      QP_SYS_HUGEPAGES "/hugepages-%" G_GUINT64_FORMAT "kB/nr_hugepages",
      page_kib);
  guint64 total = 1;
  HostPool pool = {page_kib, read_sys_u64(path, &total) && total == 0};
  g_array_append_val(pools, pool);
  return pool.empty;
}

/* The pools of node N as they are now: their sizes from sysfs, where hwloc
 * read them as the topology was made. A page size of which the host has no
 * page at all is empty on every node: its two files per node are not read
 * (POOLS: what the host has, host_pool_empty()). */
static void
read_live_pools(QpNode *n, GArray *pools)
{
  for (guint i = 0; i < n->hugepages->len; i++) {
    QpHugePool *pool = &g_array_index(n->hugepages, QpHugePool, i);
    if (host_pool_empty(pools, pool->page_kib)) {
      pool->total = pool->free = 0;
      continue;
    }
    g_autofree char *dir = g_strdup_printf(
        QP_SYS_NODE "/node%d/hugepages/hugepages-%" G_GUINT64_FORMAT "kB",
        n->id, pool->page_kib);
    g_autofree char *nr = g_build_filename(dir, "nr_hugepages", NULL);
    g_autofree char *fr = g_build_filename(dir, "free_hugepages", NULL);
    read_sys_u64(nr, &pool->total);
    if (!read_sys_u64(fr, &pool->free))
      pool->free = pool->total;
  }
}

static void
fill_distances(QpHost *host, hwloc_topology_t topo)
{
  const guint n = host->n_nodes;
  host->distance = g_new(guint, (gsize)n * n);
  for (guint i = 0; i < n; i++)
    for (guint j = 0; j < n; j++)
      host->distance[i * n + j] =
          i == j ? QP_DISTANCE_LOCAL : QP_DISTANCE_REMOTE;

  struct hwloc_distances_s *found[8];
  unsigned nr = G_N_ELEMENTS(found);
  if (hwloc_distances_get_by_type(topo, HWLOC_OBJ_NUMANODE, &nr, found,
                                  HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) < 0)
    return;
  nr = MIN(nr, G_N_ELEMENTS(found));
  /* Prefer the OS's matrix (ACPI SLIT, "NUMALatency") over a user one. */
  struct hwloc_distances_s *d = NULL;
  for (unsigned k = 0; k < nr; k++) {
    const char *name = hwloc_distances_get_name(topo, found[k]);
    if (d == NULL || (name != NULL && strcmp(name, "NUMALatency") == 0))
      d = found[k];
  }
  if (d != NULL) {
    for (unsigned i = 0; i < d->nbobjs; i++) {
      int a = qp_host_node_index(host, (int)d->objs[i]->os_index);
      for (unsigned j = 0; j < d->nbobjs && a >= 0; j++) {
        int b = qp_host_node_index(host, (int)d->objs[j]->os_index);
        if (b >= 0)
          host->distance[(guint)a * n + (guint)b] = (guint)MIN(
              d->values[i * d->nbobjs + j], (hwloc_uint64_t)G_MAXUINT);
      }
    }
  }
  for (unsigned k = 0; k < nr; k++)
    hwloc_distances_release(topo, found[k]);
}

static void
fill_kinds(QpHost *host, hwloc_topology_t topo)
{
  int nr = hwloc_cpukinds_get_nr(topo, 0);
  if (nr <= 0) {
    host->n_kinds = 1;
    host->kind_names = g_new0(char *, 2);
    host->kind_names[0] = g_strdup("kind0");
    host->kind_efficiency = g_new(int, 1);
    host->kind_efficiency[0] = -1;
    return;
  }
  host->n_kinds = (guint)nr;
  host->kind_names = g_new0(char *, (gsize)nr + 1);
  host->kind_efficiency = g_new(int, nr);
  g_auto(hwloc_bitmap_t) set = hwloc_bitmap_alloc();
  for (int k = 0; k < nr; k++) {
    int efficiency = -1;
    unsigned n_infos = 0;
    struct hwloc_info_s *infos = NULL;
    const char *name = NULL;
    hwloc_bitmap_zero(set);
    if (hwloc_cpukinds_get_info(topo, (unsigned)k, set, &efficiency, &n_infos,
                                &infos, 0) < 0)
      efficiency = -1;
    for (unsigned i = 0; i < n_infos; i++)
      if (strcmp(infos[i].name, "CoreType") == 0)
        name = infos[i].value;
    host->kind_names[k] =
        name != NULL ? g_strdup(name) : g_strdup_printf("kind%d", k);
    host->kind_efficiency[k] = efficiency;
    for (guint c = 0; c < host->n_cpus; c++)
      if (hwloc_bitmap_isset(set, (unsigned)host->cpus[c].id))
        host->cpus[c].kind = k;
  }
}

/* The node of a PCI device: the one node near its hwloc parent. Nodes with
 * CPUs win over CPU-less ones attached at the same place. */
static int
pci_node(const QpHost *host, hwloc_topology_t topo, hwloc_obj_t dev)
{
  hwloc_obj_t parent = hwloc_get_non_io_ancestor_obj(topo, dev);
  if (parent == NULL || parent->nodeset == NULL)
    return -1;
  int with_cpus = -1, n_with_cpus = 0, any = -1, n_any = 0;
  for (guint i = 0; i < host->n_nodes; i++) {
    const QpNode *n = &host->nodes[i];
    if (!hwloc_bitmap_isset(parent->nodeset, (unsigned)n->id))
      continue;
    any = n->id;
    n_any++;
    if (!hwloc_bitmap_iszero(n->all_cpus)) {
      with_cpus = n->id;
      n_with_cpus++;
    }
  }
  if (n_with_cpus == 1)
    return with_cpus;
  if (n_with_cpus == 0 && n_any == 1)
    return any;
  return -1;
}

static void
fill_pci(QpHost *host, hwloc_topology_t topo)
{
  host->pci = g_array_new(FALSE, TRUE, sizeof(QpPciDevice));
  for (hwloc_obj_t d = hwloc_get_next_pcidev(topo, NULL); d != NULL;
       d = hwloc_get_next_pcidev(topo, d)) {
    const struct hwloc_pcidev_attr_s *a = &d->attr->pcidev;
    QpPciDevice dev = {
        .bdf = g_strdup_printf("%04x:%02x:%02x.%01x", (unsigned)a->domain,
                               (unsigned)a->bus, (unsigned)a->dev,
                               (unsigned)a->func),
        .node = pci_node(host, topo, d),
    };
    g_array_append_val(host->pci, dev);
  }
  g_array_sort(host->pci, compare_pci);
}

/* Recomputes cpus[].allowed and nodes[].cpus from host->allowed. */
static void
apply_allowed(QpHost *host)
{
  for (guint c = 0; c < host->n_cpus; c++)
    host->cpus[c].allowed =
        hwloc_bitmap_isset(host->allowed, (unsigned)host->cpus[c].id);
  for (guint i = 0; i < host->n_nodes; i++)
    hwloc_bitmap_and(host->nodes[i].cpus, host->nodes[i].all_cpus,
                     host->allowed);
}

/* The CPUs and nodes hwloc allows (a cgroup's), before this process's own
 * affinity: the part of host->allowed that a topology holds. */
static void
fill_allowed(QpHost *host, hwloc_topology_t topo, hwloc_const_bitmap_t all)
{
  host->allowed = hwloc_bitmap_dup(hwloc_topology_get_allowed_cpuset(topo));
  hwloc_bitmap_and(host->allowed, host->allowed, all);
  host->allowed_nodes =
      hwloc_bitmap_dup(hwloc_topology_get_allowed_nodeset(topo));
  /* Linux lists only nodes with memory in a cpuset's mems (N_MEMORY), so a
   * node of CPUs without memory is never allowed there, whatever the
   * cgroup; it has nothing to bind, and leaving it out would leave its
   * CPUs, which the process may use, out of every plan. */
  for (guint i = 0; i < host->n_nodes; i++) {
    const QpNode *n = &host->nodes[i];
    if (n->total_mib == 0 && n->id >= 0 &&
        hwloc_bitmap_intersects(n->all_cpus, host->allowed))
      hwloc_bitmap_set(host->allowed_nodes, (unsigned)n->id);
  }
}

/* A node of usable CPUs whose memory the cgroup (or, live, the policy)
 * keeps the process off is planned as a node without memory
 * (fill_allowed()'s rule): its CPUs run the vCPUs, the memory goes to the
 * nearest nodes it may use, as QEMU alone under the same confinement runs.
 * HOST's allowed nodes are those the confinement gives, the denied ones
 * not yet among them. */
static void
deny_memory(QpHost *host)
{
  hwloc_bitmap_free(host->mem_denied);
  host->mem_denied = hwloc_bitmap_alloc();
  for (guint i = 0; host->allowed_nodes != NULL && i < host->n_nodes; i++) {
    const QpNode *n = &host->nodes[i];
    if (n->id >= 0 && n->total_mib > 0 &&
        !hwloc_bitmap_isset(host->allowed_nodes, (unsigned)n->id) &&
        hwloc_bitmap_intersects(n->all_cpus, host->allowed)) {
      hwloc_bitmap_set(host->mem_denied, (unsigned)n->id);
      hwloc_bitmap_set(host->allowed_nodes, (unsigned)n->id);
    }
  }
}

gboolean
qp_host_apply_live(QpHost *host, struct QpWatermarkCache *watermarks,
                   GError **error)
{
  g_autoptr(GArray) pools = g_array_new(FALSE, FALSE, sizeof(HostPool));
  for (guint i = 0; i < host->n_nodes; i++)
    read_live_pools(&host->nodes[i], pools);
  qp_host_read_node_memory(host, watermarks);
  g_auto(hwloc_bitmap_t) affinity = hwloc_bitmap_alloc();
  g_auto(hwloc_bitmap_t) isolated = NULL;
  if (!read_affinity(affinity, error) || !read_isolated(&isolated, error))
    return FALSE;
  hwloc_bitmap_and(host->allowed, host->allowed, affinity);
  if (isolated != NULL)
    hwloc_bitmap_andnot(host->allowed, host->allowed, isolated);
  /* An inherited memory policy keeps memory on its nodes as cpuset.mems
   * does; nodes without memory (which no policy names) stay allowed as
   * fill_allowed() lets them. */
  g_auto(hwloc_bitmap_t) policy = read_mempolicy();
  if (policy != NULL && host->allowed_nodes != NULL)
    for (guint i = 0; i < host->n_nodes; i++) {
      const QpNode *n = &host->nodes[i];
      if (n->id >= 0 && n->total_mib > 0 &&
          !hwloc_bitmap_isset(policy, (unsigned)n->id))
        hwloc_bitmap_clr(host->allowed_nodes, (unsigned)n->id);
    }
  deny_memory(host);
  /* What only the cgroup and the affinity this process was started with
   * keep out: an orchestrator may give a thread of QEMU more later. */
  hwloc_bitmap_free(host->beyond_affinity);
  host->beyond_affinity = hwloc_bitmap_alloc();
  for (guint c = 0; c < host->n_cpus; c++)
    hwloc_bitmap_set(host->beyond_affinity, (unsigned)host->cpus[c].id);
  hwloc_bitmap_andnot(host->beyond_affinity, host->beyond_affinity,
                      host->allowed);
  if (isolated != NULL)
    hwloc_bitmap_andnot(host->beyond_affinity, host->beyond_affinity, isolated);
  apply_allowed(host);
  return TRUE;
}

/* hwloc groups the nodes closest to each other (the smallest distance
 * between two nodes, and the nodes linked by it) and puts each group in the
 * tree; a group whose CPUs cross a package, neither inside it nor holding
 * it whole, cannot go there, and hwloc reports the host as inconsistent.
 * Says which group and packages, or NULL when the distances agree. */
static char *
distances_across_packages(const QpHost *host)
{
  guint n = host->n_nodes;
  guint dmin = G_MAXUINT;
  for (guint i = 0; i < n; i++)
    for (guint j = 0; j < n; j++)
      if (i != j)
        dmin = MIN(dmin, host->distance[i * n + j]);
  if (n < 3 || dmin == G_MAXUINT)
    return NULL;
  /* Groups: the nodes linked by the smallest distance, transitively. */
  g_autofree guint *group = g_new(guint, n);
  for (guint i = 0; i < n; i++)
    group[i] = i;
  for (gboolean changed = TRUE; changed;) {
    changed = FALSE;
    for (guint i = 0; i < n; i++)
      for (guint j = 0; j < n; j++)
        if (i != j && group[j] < group[i] &&
            (host->distance[i * n + j] == dmin ||
             host->distance[j * n + i] == dmin)) {
          group[i] = group[j];
          changed = TRUE;
        }
  }
  for (guint g = 0; g < n; g++) {
    g_auto(hwloc_bitmap_t) nodes = hwloc_bitmap_alloc();
    g_auto(hwloc_bitmap_t) cpus = hwloc_bitmap_alloc();
    for (guint i = 0; i < n; i++)
      if (group[i] == g) {
        hwloc_bitmap_set(nodes, (unsigned)host->nodes[i].id);
        hwloc_bitmap_or(cpus, cpus, host->nodes[i].all_cpus);
      }
    if (hwloc_bitmap_weight(nodes) < 2 || hwloc_bitmap_weight(nodes) == (int)n)
      continue;
    g_auto(hwloc_bitmap_t) crossed = hwloc_bitmap_alloc();
    for (guint c = 0; c < host->n_cpus; c++) {
      int pkg = host->cpus[c].package;
      if (pkg < 0 || hwloc_bitmap_isset(crossed, (unsigned)pkg))
        continue;
      g_auto(hwloc_bitmap_t) in_pkg = hwloc_bitmap_alloc();
      for (guint d = 0; d < host->n_cpus; d++)
        if (host->cpus[d].package == pkg)
          hwloc_bitmap_set(in_pkg, (unsigned)host->cpus[d].id);
      if (hwloc_bitmap_intersects(cpus, in_pkg) &&
          !hwloc_bitmap_isincluded(cpus, in_pkg) &&
          !hwloc_bitmap_isincluded(in_pkg, cpus))
        hwloc_bitmap_set(crossed, (unsigned)pkg);
    }
    if (hwloc_bitmap_iszero(crossed))
      continue;
    g_autofree char *nl = qp_list_format(nodes);
    g_autofree char *pl = qp_list_format(crossed);
    return g_strdup_printf(
        "the host's NUMA distances are inconsistent with its packages: "
        "nodes %s are closest to each other (distance %u) but their CPUs "
        "cross packages %s, so hwloc ignored that grouping (placement uses "
        "the distances as they are)",
        nl, dmin, pl);
  }
  return NULL;
}

/* Nodes, ascending id. */
static void
fill_nodes(QpHost *host, hwloc_topology_t topo)
{
  host->n_nodes =
      (guint)MAX(hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE), 0);
  host->nodes = g_new0(QpNode, MAX(host->n_nodes, 1));
  guint i = 0;
  for (hwloc_obj_t o =
           hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, NULL);
       o != NULL && i < host->n_nodes;
       o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, o))
    fill_node(&host->nodes[i++], o);
  host->n_nodes = i;
  qsort(host->nodes, host->n_nodes, sizeof(QpNode), compare_node);
}

/* CPU ID (PU) into host->cpus[C], and into its core: a new one in
 * CORES unless CORE_OF knows its hwloc core already. */
static void
add_cpu(QpHost *host, hwloc_topology_t topo, hwloc_obj_t pu, int id, guint c,
        GHashTable *core_of, GArray *cores)
{
  hwloc_obj_t core_obj =
      hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_CORE, pu);
  gpointer key = core_obj != NULL ? (gpointer)core_obj : (gpointer)pu;
  QpCpu *cpu = &host->cpus[c];
  cpu->id = id;
  cpu->node = node_of_pu(pu);
  cpu->package = package_of(topo, pu);
  gpointer found;
  if (g_hash_table_lookup_extended(core_of, key, NULL, &found)) {
    cpu->core = GPOINTER_TO_INT(found);
  } else {
    QpCore core = {
        .package = cpu->package,
        .node = cpu->node,
        .pus = hwloc_bitmap_alloc(),
    };
    cpu->core = (int)cores->len;
    g_array_append_val(cores, core);
    g_hash_table_insert(core_of, key, GINT_TO_POINTER(cpu->core));
  }
  hwloc_bitmap_set(g_array_index(cores, QpCore, cpu->core).pus, (unsigned)id);
  int ni = qp_host_node_index(host, cpu->node);
  if (ni >= 0)
    hwloc_bitmap_set(host->nodes[ni].all_cpus, (unsigned)id);
}

/* CPUs, ascending id, and cores in order of their first PU; ALL gets
 * every CPU. Fails on a host without CPUs. */
static gboolean
fill_cpus(QpHost *host, hwloc_topology_t topo, const char *name,
          hwloc_bitmap_t all, GError **error)
{
  g_autoptr(GPtrArray) pus = g_ptr_array_new();
  for (hwloc_obj_t o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PU, NULL);
       o != NULL; o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PU, o))
    g_ptr_array_add(pus, o);
  if (pus->len == 0) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LOAD,
                "host %s has no CPUs: expected at least one PU", name);
    return FALSE;
  }
  g_autoptr(GHashTable) pu_of_id = g_hash_table_new(NULL, NULL);
  for (guint k = 0; k < pus->len; k++) {
    hwloc_obj_t pu = g_ptr_array_index(pus, k);
    if (g_hash_table_contains(pu_of_id, GUINT_TO_POINTER(pu->os_index))) {
      g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_FILE,
                  "host %s lists CPU %u twice: expected each CPU once", name,
                  pu->os_index);
      return FALSE;
    }
    g_hash_table_insert(pu_of_id, GUINT_TO_POINTER(pu->os_index), pu);
    hwloc_bitmap_set(all, pu->os_index);
  }
  host->n_cpus = pus->len;
  host->cpus = g_new0(QpCpu, host->n_cpus);
  g_autoptr(GHashTable) core_of = g_hash_table_new(NULL, NULL);
  GArray *cores = g_array_new(FALSE, TRUE, sizeof(QpCore));
  guint c = 0;
  int id;
  hwloc_bitmap_foreach_begin(id, all)
  {
    hwloc_obj_t pu = g_hash_table_lookup(pu_of_id, GUINT_TO_POINTER((guint)id));
    add_cpu(host, topo, pu, id, c++, core_of, cores);
  }
  hwloc_bitmap_foreach_end();
  host->n_cores = cores->len;
  host->cores = (QpCore *)(void *)g_array_free(cores, FALSE);
  return TRUE;
}

/* What TOPO says of the host: everything but the live step
 * (qp_host_apply_live()), which a live host takes next. */
static QpHost *
build_static(hwloc_topology_t topo, const char *name, GError **error)
{
  g_autoptr(QpHost) host = g_new0(QpHost, 1);
  host->source = g_strdup(name);
  fill_nodes(host, topo);
  g_auto(hwloc_bitmap_t) all = hwloc_bitmap_alloc();
  if (!fill_cpus(host, topo, name, all, error))
    return NULL;
  fill_allowed(host, topo, all);
  apply_allowed(host);
  fill_kinds(host, topo);
  qp_host_fill_cache_domains(host, topo);
  fill_distances(host, topo);
  fill_pci(host, topo);
  host->inconsistent = distances_across_packages(host);
  return g_steal_pointer(&host);
}

/* A recorded host no machine could be (a file edited by hand, or broken):
 * memory beyond a PiB on a node (a negative size read back). */
static gboolean
check_recorded(const QpHost *host, const char *name, GError **error)
{
  for (guint i = 0; i < host->n_nodes; i++)
    if (host->nodes[i].total_mib > (G_GUINT64_CONSTANT(1) << 30)) {
      g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_FILE,
                  "host %s: node %d has %" G_GUINT64_FORMAT
                  " MiB of memory: expected at most a PiB (a size the file "
                  "may hold negative)",
                  name, host->nodes[i].id, host->nodes[i].total_mib);
      return FALSE;
    }
  /* (CPUs in no node are not refused: a host recorded in a cgroup whose
   * cpuset.mems leaves their node out has them, and plans leave them out
   * too.) */
  return TRUE;
}

static QpHost *
build_host(hwloc_topology_t topo, Source source, const char *name,
           GError **error)
{
  g_autoptr(QpHost) host = build_static(topo, name, error);
  if (host == NULL ||
      (source == SOURCE_XML && !check_recorded(host, name, error)) ||
      (source == SOURCE_LIVE && !qp_host_apply_live(host, NULL, error)))
    return NULL;
  /* A recorded host is planned in the confinement it was recorded in, as
   * a live one is in this process's (qp_host_apply_live()). */
  if (source == SOURCE_XML)
    deny_memory(host);
  return g_steal_pointer(&host);
}

/* Plugins qemu-pin never uses, which hwloc would dlopen at its first init
 * all the same: libxml2 with ICU (hwloc's own parser reads recorded XML),
 * OpenCL and X11 (OS devices are filtered out), libpciaccess (blacklisted
 * below: Linux sysfs finds the same devices). Loading them costs about
 * 5 ms of every launch. */
#define UNUSED_PLUGINS "hwloc_xml_libxml,hwloc_opencl,hwloc_gl,hwloc_pci"

/* Sets the environment variable NAME to VALUE and returns its old value
 * (NULL if unset), for put_env() once hwloc has read it. */
static char *
swap_env(const char *name, const char *value)
{
  char *saved = g_strdup(g_getenv(name));
  g_setenv(name, value, TRUE);
  return saved;
}

static void
put_env(const char *name, const char *saved)
{
  if (saved != NULL)
    g_setenv(name, saved, TRUE);
  else
    g_unsetenv(name);
}

int
qp_hwloc_topology_init(hwloc_topology_t *topo)
{
  const char *name = "HWLOC_PLUGINS_BLACKLIST";
  const char *current = g_getenv(name);
  g_autofree char *list =
      current != NULL && current[0] != '\0'
          ? g_strdup_printf("%s,%s", current, UNUSED_PLUGINS)
          : g_strdup(UNUSED_PLUGINS);
  /* Read during this init only: put the environment back for QEMU, which
   * inherits it. hwloc reads HWLOC_HIDE_ERRORS once per process, at its
   * first report or at hwloc_hide_errors(), which fixes it here. */
  g_autofree char *saved = swap_env(name, list);
  /* No plugin directory at all: a plugin is a shared object built for the
   * shared hwloc and C library, which the statically linked launcher
   * (launcher/front/main.c) must never load; and qemu-pin uses none. */
  g_autofree char *saved_path = swap_env("HWLOC_PLUGINS_PATH", "");
  g_autofree char *saved_hide = swap_env("HWLOC_HIDE_ERRORS", "2");
  hwloc_hide_errors();
  int r = hwloc_topology_init(topo);
  put_env(name, saved);
  put_env("HWLOC_PLUGINS_PATH", saved_path);
  put_env("HWLOC_HIDE_ERRORS", saved_hide);
  return r;
}

static hwloc_topology_t
new_topology(gboolean with_io)
{
  hwloc_topology_t topo = NULL;
  if (qp_hwloc_topology_init(&topo) < 0)
    g_error("hwloc_topology_init failed: out of memory");
  /* See disallowed CPUs and nodes too; they are marked, not dropped. */
  hwloc_topology_set_flags(topo, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  /* PCI devices of every class (vfio-pci takes any), only the bridges that
   * lead to them, no OS devices. */
  hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  hwloc_topology_set_type_filter(topo, HWLOC_OBJ_PCI_DEVICE,
                                 HWLOC_TYPE_FILTER_KEEP_ALL);
  hwloc_topology_set_type_filter(topo, HWLOC_OBJ_OS_DEVICE,
                                 HWLOC_TYPE_FILTER_KEEP_NONE);
  /* Without devices a live load is several times faster, and a launch
   * needs them only for vfio-pci locality. */
  if (!with_io)
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
  /* Data caches stay: they are the cache domains, and a NUMA node may hang
   * below one (a node per L3 on AMD Bulldozer, `numa:4 l3:1` in a synthetic
   * description); without its cache the node moves up to the package and
   * takes the CPUs of its neighbours. Instruction caches add nothing. */
  hwloc_topology_set_cache_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_ALL);
  hwloc_topology_set_icache_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
  /* Linux sysfs ("linuxio") finds the same PCI devices as the libpciaccess
   * plugin, which leaks memory on every load and reads config space. */
  hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
                                "pci");
  return topo;
}

QpHost *
qp_host_load(const char *xml_path, GError **error)
{
  return qp_host_load_full(xml_path, TRUE, error);
}

QpHost *
qp_host_load_full(const char *xml_path, gboolean with_io, GError **error)
{
  g_auto(hwloc_topology_t) topo = new_topology(with_io);

  if (xml_path != NULL) {
    if (!g_file_test(xml_path, G_FILE_TEST_IS_REGULAR)) {
      g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_FILE,
                  "topology file %s: %s: expected a recorded hwloc XML file "
                  "(lstopo --of xml FILE)",
                  xml_path,
                  g_file_test(xml_path, G_FILE_TEST_EXISTS)
                      ? "not a regular file"
                      : "no such file");
      return NULL;
    }
    if (hwloc_topology_set_xml(topo, xml_path) < 0 ||
        hwloc_topology_load(topo) < 0) {
      g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_FILE,
                  "topology file %s is not a valid hwloc XML topology: "
                  "expected a file written by lstopo --of xml",
                  xml_path);
      return NULL;
    }
    return build_host(topo, SOURCE_XML, xml_path, error);
  }

  if (hwloc_topology_load(topo) < 0) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LOAD,
                "cannot read this host's topology with hwloc: %s",
                g_strerror(errno));
    return NULL;
  }
  return build_host(topo, SOURCE_LIVE, "live", error);
}

QpHost *
qp_host_load_synthetic(const char *description, GError **error)
{
  g_auto(hwloc_topology_t) topo = new_topology(TRUE);
  if (description == NULL ||
      hwloc_topology_set_synthetic(topo, description) < 0 ||
      hwloc_topology_load(topo) < 0) {
    g_set_error(
        error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID,
        "synthetic topology '%s' is not valid: expected an hwloc "
        "description such as \"pack:2 numa:2(memory=16GiB) core:4 pu:2\"",
        description != NULL ? description : "");
    return NULL;
  }
  return build_host(topo, SOURCE_SYNTHETIC, description, error);
}

void
qp_host_set_allowed(QpHost *host, hwloc_const_bitmap_t allowed)
{
  g_auto(hwloc_bitmap_t) all = hwloc_bitmap_alloc();
  for (guint c = 0; c < host->n_cpus; c++)
    hwloc_bitmap_set(all, (unsigned)host->cpus[c].id);
  hwloc_bitmap_and(host->allowed, allowed, all);
  apply_allowed(host);
}

/* ---- The live host through a snapshot (topology/host/snapshot.c) ------ */

QpHost *
qp_host_load_live_static(GError **error)
{
  g_auto(hwloc_topology_t) topo = new_topology(FALSE);
  if (hwloc_topology_load(topo) < 0) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LOAD,
                "cannot read this host's topology with hwloc: %s",
                g_strerror(errno));
    return NULL;
  }
  return build_static(topo, "live", error);
}
