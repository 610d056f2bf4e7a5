/* The host as qemu-pin sees it: allowed CPUs, cores and SMT siblings, NUMA
 * nodes with memory and hugepage pools, CPU kinds, the SLIT distance matrix,
 * and the node of each PCI device.
 *
 * Built from hwloc (live, a recorded XML file, or a synthetic description);
 * once built it is plain data, so the planner stays a pure function. */
#pragma once

#include <glib.h>
#include <hwloc.h>

#include "topology/base/cpulist.h"

G_BEGIN_DECLS

/* Distances when the host reports none: the ACPI SLIT convention for
 * "local" and "remote, distance unknown". */
#define QP_DISTANCE_LOCAL 10
#define QP_DISTANCE_REMOTE 20

typedef struct {
  guint64 page_kib; /* 2048, 1048576, ... */
  guint64 total;    /* pages in the pool */
  guint64 free;     /* pages free now (== total for recorded hosts) */
} QpHugePool;

typedef struct {
  int id;                  /* OS node number */
  guint64 total_mib;       /* memory of the node */
  guint64 free_mib;        /* free now (== total for recorded hosts) */
  hwloc_bitmap_t cpus;     /* CPUs of the node this process may use */
  hwloc_bitmap_t all_cpus; /* every CPU of the node */
  GArray *hugepages;       /* of QpHugePool, ascending page size */
  /* Live hosts only (node-memory.h): what the kernel said as the host was
   * loaded. Recorded and synthetic hosts have measured FALSE: nothing used,
   * total less claims is all the room there is. */
  gboolean measured;
  guint64 can_give_mib; /* what the kernel can give on the node now without
                           swapping or killing (free + reclaimable - its
                           watermarks, ZFS's ARC above c_min included) */
  guint64 used_mib;     /* ordinary memory in use: total - free - hugepage
                           pools */
  guint64 arc_mib;      /* the ARC's share of can_give_mib */
} QpNode;

typedef struct {
  int id;      /* OS index of the PU */
  int core;    /* index into QpHost.cores */
  int node;    /* OS node id of the nearest node with memory, -1 if none */
  int package; /* OS index of the package */
  int kind;    /* index into kinds, 0 on homogeneous hosts */
  gboolean allowed;
} QpCpu;

/* Cache domain levels: the cores that share an L3, and a cluster of cores
 * that share an L2 (hybrid E-cores, Bulldozer modules) inside it. */
#define QP_CACHE_L3 0
#define QP_CACHE_L2 1
#define QP_CACHE_LEVELS 2

typedef struct {
  int package;
  int node;           /* OS node id, -1 if none */
  hwloc_bitmap_t pus; /* every PU (SMT sibling) of the core */
  /* Its cache domain per level (QP_CACHE_L3, QP_CACHE_L2): index into
   * QpHost.domains, -1 when it has none at that level. */
  int domain[QP_CACHE_LEVELS];
} QpCore;

/* Cores that share a cache, inside one NUMA node: an L3 (a CCX or CCD on
 * AMD), or an L2, shared by more than one core (an L3 per core, as some
 * VMs show, is none). A cache over several nodes
 * (one L3 per package under Intel sub-NUMA clustering) is no domain: the
 * node is the smaller unit there. */
typedef struct {
  int level;           /* QP_CACHE_L3 or QP_CACHE_L2 */
  int node;            /* OS node id */
  guint64 size_kib;    /* cache size, 0 if unknown */
  hwloc_bitmap_t cpus; /* every PU of its cores */
  guint n_cores;
} QpCacheDomain;

typedef struct {
  char *bdf; /* "0000:3b:00.0" */
  int node;  /* OS node id, -1 if unknown */
} QpPciDevice;

typedef struct {
  char *source; /* "live", an XML path, or a synthetic description */
  guint n_nodes;
  QpNode *nodes; /* ascending id */
  guint n_cores;
  QpCore *cores; /* ascending first PU */
  guint n_cpus;
  QpCpu *cpus;            /* ascending id */
  guint *distance;        /* n_nodes * n_nodes, by index into nodes[] */
  hwloc_bitmap_t allowed; /* CPUs this process may use */
  guint n_kinds;          /* >= 1 */
  GArray *pci;            /* of QpPciDevice */
  char **kind_names;      /* n_kinds names: hwloc CoreType info ("IntelAtom",
                           * "IntelCore"), else "kindN" */
  int *kind_efficiency;   /* n_kinds hwloc efficiencies, -1 if unknown */
  hwloc_bitmap_t allowed_nodes; /* nodes this process may bind memory to */
  /* CPUs of the host that only this process's cgroup and start affinity
   * keep out of allowed (not isolated ones): a live host's, else NULL */
  hwloc_bitmap_t beyond_affinity;
  /* Nodes whose CPUs this process may use but whose memory its cgroup
   * (cpuset.mems) or inherited memory policy keeps it off: in
   * allowed_nodes, planned as nodes without memory (their memory and
   * hugepages count as none). A live host's, else NULL. */
  hwloc_bitmap_t mem_denied;
  guint n_domains;
  QpCacheDomain *domains; /* by node id, then level, then first CPU */
  char *inconsistent;     /* how the host's distances contradict its packages
                             (hwloc then ignores its distance groups), or NULL */
} QpHost;

/* Loads the live host (XML_PATH == NULL) or a recorded hwloc XML file;
 * free memory of the live host from its nodes' meminfo. How it reads hwloc:
 * - allowed: live = hwloc's allowed cpuset (cgroup) & sched_getaffinity()
 *   - isolated CPUs; XML = the recorded allowed_cpuset; synthetic = all.
 * - A CPU belongs to one node: the NUMA node attached nearest above it
 *   (lowest id when several share that level). Nodes attached higher up
 *   (CXL, NVDIMM, HBM with no CPUs of their own) have empty cpus/all_cpus.
 * - kinds: hwloc cpukinds order, lowest efficiency first (E-cores = kind 0
 *   on a hybrid host, P-cores the last kind); n_kinds == 1 without cpukinds.
 * - distances: hwloc's NUMA latency matrix (ACPI SLIT); when the host has
 *   none (synthetic hosts, some VMs), 10 on the diagonal and 20 elsewhere.
 * - hugepages: every hwloc page type but the smallest (the base page);
 *   live free counts from /sys/devices/system/node/nodeN/hugepages.
 * - cache domains: each L3 and each L2 of more than one core whose CPUs
 *   lie inside one node (QpCacheDomain); none on a host without caches.
 * - PCI devices of every class (a vfio-pci device may be anything); node is
 *   the single node near the device's hwloc parent, -1 when not one. */
QpHost *qp_host_load(const char *xml_path, GError **error);

/* The same; without WITH_IO the PCI devices are not read (pci stays empty),
 * which makes a live load several times faster. */
QpHost *qp_host_load_full(const char *xml_path, gboolean with_io,
                          GError **error);

/* Builds a host from an hwloc synthetic description, e.g.
 * "pack:2 numa:2(memory=16GiB) core:4 pu:2". For tests and benchmarks. */
QpHost *qp_host_load_synthetic(const char *description, GError **error);

/* Replaces the distance matrix: MATRIX holds n_nodes * n_nodes values,
 * row-major by index into host->nodes. hwloc synthetic descriptions cannot
 * carry distances, so tests and benchmarks set them with this. */
void qp_host_set_distances(QpHost *host, const guint *matrix);

/* Restricts the CPUs this process may use to ALLOWED (intersected with the
 * host's CPUs): updates host->allowed, cpus[].allowed and nodes[].cpus.
 * For tests that model a cgroup subset on a synthetic host. */
void qp_host_set_allowed(QpHost *host, hwloc_const_bitmap_t allowed);

void qp_host_free(QpHost *host);

/* hwloc_topology_init() without loading hwloc plugins qemu-pin never uses
 * (XML through libxml2, OpenCL, GL, libpciaccess), and with hwloc's error
 * reports (HWLOC_HIDE_ERRORS=2) kept off stderr: a host whose firmware
 * distances contradict its packages makes hwloc print a 15-line banner on
 * every load. The environment is left as it was. */
int qp_hwloc_topology_init(hwloc_topology_t *topo);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QpHost, qp_host_free)

/* For topology/host/snapshot.c, the live host in two steps. First what
 * hwloc's topology says of it (without PCI devices, and with host->allowed
 * hwloc's allowed CPUs, before this process's affinity): the part a
 * snapshot keeps. */
QpHost *qp_host_load_live_static(GError **error);
/* Then the live step, on a host from the first or from a snapshot: the
 * hugepage pools from sysfs, node memory (qp_host_read_node_memory(), with
 * the zones' watermark figures of WATERMARKS, which may be NULL),
 * this process's affinity and the isolated CPUs taken out of allowed, and
 * cpus[].allowed and nodes[].cpus made anew. qp_host_load_full()'s live
 * load is the two steps. */
struct QpWatermarkCache; /* topology/host/node-memory.h */
gboolean qp_host_apply_live(QpHost *host, struct QpWatermarkCache *watermarks,
                            GError **error);

/* Index of node ID in host->nodes, or -1. */
int qp_host_node_index(const QpHost *host, int id);
/* Whether node ID has memory this process may not use (mem_denied). */
gboolean qp_host_node_mem_denied(const QpHost *host, int id);

/* Index of CPU ID in host->cpus, or -1. */
int qp_host_cpu_index(const QpHost *host, int id);

/* The CPUs of kind K (a new bitmap). */
hwloc_bitmap_t qp_host_kind_cpus(const QpHost *host, guint k);

/* SLIT distance between node ids A and B (10 for A == B when unknown). */
guint qp_host_distance(const QpHost *host, int a, int b);

/* SLIT distance between the nodes of index I and J in host->nodes
 * (QP_DISTANCE_LOCAL or _REMOTE when the host has no matrix). */
guint qp_host_distance_at(const QpHost *host, guint i, guint j);

/* The PCI device BDF of HOST ("0000:3b:00.0" or "3b:00.0"), or NULL. */
const QpPciDevice *qp_host_find_pci(const QpHost *host, const char *bdf);

G_END_DECLS
