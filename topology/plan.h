/* The placement engine: a pure function (host, claims, request, options) ->
 * plan. No I/O, no clock, no globals: every decision can be replayed from a
 * recorded host and a ledger snapshot. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <hwloc.h>

#include "topology/cpulist.h"
#include "topology/host.h"

G_BEGIN_DECLS

typedef enum {
  QP_MODE_AUTO,
  QP_MODE_NONE,
  QP_MODE_BALANCED,
  QP_MODE_NUMA,
  QP_MODE_ONE_TO_ONE,
} QpMode;

typedef enum {
  QP_POLICY_DEFAULT, /* not set: qemu-pin chooses (bind) */
  QP_POLICY_BIND,
  QP_POLICY_PREFERRED,
  QP_POLICY_INTERLEAVE,
} QpPolicy;

typedef enum { QP_STRATEGY_SPREAD, QP_STRATEGY_PACK } QpStrategy;
typedef enum { QP_SMT_PREFER, QP_SMT_STRICT } QpSmt;
typedef enum {
  QP_DEVLOC_PREFERRED,
  QP_DEVLOC_REQUIRED,
  QP_DEVLOC_IGNORE,
} QpDeviceLocality;

const char *qp_mode_name(QpMode mode);
gboolean qp_mode_parse(const char *text, QpMode *out);
const char *qp_policy_name(QpPolicy policy); /* "bind", ... ("default") */
gboolean qp_policy_parse(const char *text, QpPolicy *out);
const char *qp_strategy_name(QpStrategy strategy);
gboolean qp_strategy_parse(const char *text, QpStrategy *out);
const char *qp_smt_name(QpSmt smt);
gboolean qp_smt_parse(const char *text, QpSmt *out);
const char *qp_device_locality_name(QpDeviceLocality d);
gboolean qp_device_locality_parse(const char *text, QpDeviceLocality *out);

/* ---- Request: what the VM needs, from QEMU's argv ---------------------- */

typedef struct {
  int id;                    /* guest node id (-numa node,nodeid=) */
  hwloc_bitmap_t vcpus;      /* vCPU indexes (cpu-index) of the node */
  guint64 mem_mib;           /* its RAM (its share of -m) */
  char *memdev;              /* backend id, NULL if none */
  hwloc_bitmap_t host_nodes; /* caller's host-nodes, NULL if unset */
  QpPolicy policy;           /* caller's policy, DEFAULT if unset */
  guint64 page_kib;          /* page size of its RAM, 0: ordinary memory */
} QpGuestNode;

/* What a piece of guest memory is. */
typedef enum {
  QP_MEM_RAM,         /* initial RAM (-m) of a guest node, or of the guest */
  QP_MEM_DIMM,        /* -device pc-dimm */
  QP_MEM_NVDIMM,      /* -device nvdimm */
  QP_MEM_VIRTIO_MEM,  /* -device virtio-mem-pci */
  QP_MEM_VIRTIO_PMEM, /* -device virtio-pmem-pci */
  QP_MEM_UNUSED,      /* a memory backend no node or device uses (yet) */
} QpMemKind;

/* "ram", "pc-dimm", "nvdimm", "virtio-mem", "virtio-pmem", "unused" */
const char *qp_mem_kind_name(QpMemKind kind);
gboolean qp_mem_kind_parse(const char *text, QpMemKind *out);

/* Guest memory beyond the RAM of the guest nodes: a memory device plugged
 * at start, or a backend no one uses yet (docs/design.md, "Memory"). */
typedef struct {
  QpMemKind kind;
  int gnode;                 /* index into gnodes; -1 without vNUMA */
  char *device;              /* the device's id, NULL if none */
  char *memdev;              /* backend id */
  guint64 mib;               /* to claim now (0: bound only) */
  guint64 page_kib;          /* 0: ordinary memory, else the hugepage size */
  hwloc_bitmap_t host_nodes; /* caller's host-nodes, NULL if unset */
  QpPolicy policy;           /* caller's policy, DEFAULT if unset */
} QpMemDevice;

typedef struct {
  guint vcpus;   /* boot vCPUs */
  guint maxcpus; /* >= vcpus */
  guint sockets, dies, clusters, cores, threads;
  guint64 mem_mib; /* initial RAM (-m) */
  guint n_gnodes;  /* 0: no vNUMA */
  QpGuestNode *gnodes;
  guint *gdistance; /* n_gnodes * n_gnodes from -numa dist, or NULL */
  gboolean prealloc;
  char **vfio; /* NULL-terminated host BDFs of -device vfio-pci */
  guint n_iothreads;
  /* The RAM of a guest without vNUMA: its page size (0: ordinary memory)
   * and the caller's binding of its -machine memory-backend. */
  guint64 page_kib;
  hwloc_bitmap_t host_nodes; /* NULL if unset */
  QpPolicy policy;
  guint n_devmem;
  QpMemDevice *devmem;
  guint64 maxmem_mib; /* -m maxmem, 0 if unset: memory can be plugged later */
} QpRequest;

QpRequest *qp_request_new(void);
void qp_request_free(QpRequest *req);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QpRequest, qp_request_free)

/* ---- Options: what the user asked of qemu-pin -------------------------- */

typedef struct {
  int node;
  guint64 mib;
} QpNodeAmount;

typedef struct {
  QpMode mode;
  QpStrategy strategy;
  QpPolicy policy; /* memory policy for bindings qemu-pin makes */
  QpSmt smt;
  QpDeviceLocality device_locality;
  gboolean vnuma;
  hwloc_bitmap_t affinity;  /* host CPUs to stay inside, NULL = all */
  hwloc_bitmap_t hostnodes; /* host nodes to stay inside, NULL = all */
  guint64 reserve_mib;      /* host reserve on each node */
  GArray *node_reserve;     /* of QpNodeAmount: per-node overrides, or NULL */
} QpPlacementOptions;

void qp_placement_options_init(QpPlacementOptions *opts);
void qp_placement_options_clear(QpPlacementOptions *opts);

/* ---- Claims: what other VMs hold (the ledger's contents) --------------- */

typedef struct {
  int node;
  guint64 page_kib;
  guint64 pages;
} QpHugeClaim;

typedef struct {
  int node;
  guint vcpus;
} QpNodeLoad;

/* Shared vCPUs that float on a set of CPUs (a VM's vCPUs with the same CPU
 * set): each CPU of the set carries vcpus / |cpus| of them. */
typedef struct {
  hwloc_bitmap_t cpus;
  guint vcpus;
} QpCpuLoad;

/* An empty GArray of QpCpuLoad that frees the sets with it. */
GArray *qp_cpu_load_array_new(void);

/* Makes DST (from qp_cpu_load_array_new()) a copy of SRC (NULL: empty). */
void qp_cpu_load_copy(GArray *dst, const GArray *src);

typedef struct {
  char *id;   /* ledger record id */
  char *name; /* VM name, or NULL */
  int qemu_pid;
  guint64 qemu_start; /* field 22 of /proc/PID/stat */
  int launcher_pid;   /* qemu-pin while it waits for -daemonize, else 0 */
  guint64 launcher_start;
  int keeper_pid;
  QpMode mode;
  GArray *mem;              /* of QpNodeAmount */
  GArray *huge;             /* of QpHugeClaim */
  hwloc_bitmap_t dedicated; /* CPUs no other VM may use */
  GArray *load;             /* of QpNodeLoad: shared vCPUs per node */
  GArray *cpu_load;         /* of QpCpuLoad: the same vCPUs per CPU set;
                               may be empty: the per-node load then
                               spreads over the node's CPUs */
  gboolean best_effort;     /* placed best-effort by mode auto */
  gint64 time;              /* unix time of the claim */
} QpClaim;

QpClaim *qp_claim_new(void);
void qp_claim_free(QpClaim *claim);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QpClaim, qp_claim_free)

typedef struct {
  GPtrArray *claims;            /* of QpClaim, live records */
  hwloc_bitmap_t blocked_nodes; /* nodes held whole (corrupt records) */
  GPtrArray *warnings;          /* of char*, shown on every plan */
} QpClaims;

QpClaims *qp_claims_new(void);
void qp_claims_free(QpClaims *claims);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QpClaims, qp_claims_free)

/* ---- Plan --------------------------------------------------------------- */

/* Units of memory on one host node: MiB of ordinary memory, or pages. */
typedef struct {
  int node;
  guint64 units;
} QpNodeUnits;

/* A piece of the guest's memory: where it is bound and what is claimed. */
typedef struct {
  int gnode;                 /* guest node id, -1 for a guest without vNUMA */
  hwloc_bitmap_t host_nodes; /* where it is bound, NULL when not bound */
  QpPolicy policy;
  guint64 mem_mib;     /* claimed (a virtio-mem: its requested-size) */
  char *memdev;        /* the caller's backend id, or NULL */
  gboolean caller_set; /* caller's host-nodes kept as they were */
  QpMemKind kind;
  char *device;     /* the device's id, or NULL */
  guint64 page_kib; /* 0: ordinary memory, else the hugepage size */
  GArray *claim;    /* of QpNodeUnits: MiB, or pages of page_kib */
} QpPlanMem;

/* A guest NUMA node the planner suggests (--vnuma for a guest without
 * -numa): it mirrors one host node of the placement. */
typedef struct {
  int id;               /* guest node id, 0.. */
  hwloc_bitmap_t vcpus; /* vCPU indexes (cpu-index) */
  guint64 mem_mib;
  int host_node; /* the host node it mirrors */
} QpPlanVnode;

typedef struct {
  QpMode mode;                 /* resolved: never AUTO */
  guint n_vcpus;               /* == request maxcpus */
  hwloc_bitmap_t *vcpu_cpus;   /* per vCPU index; equal to process_cpus
                                  when vCPUs float */
  hwloc_bitmap_t process_cpus; /* CPUs the whole process may use */
  hwloc_bitmap_t emulator_cpus;
  hwloc_bitmap_t iothread_cpus;
  hwloc_bitmap_t startup_cpus; /* affinity before exec */
  hwloc_bitmap_t mem_nodes;    /* process-wide memory policy nodes, or NULL */
  QpPolicy mem_policy;
  guint n_mem;
  /* Every piece of the guest's memory: the RAM of each guest node (or of
   * the guest) in guest node order, then its memory devices and unused
   * backends in command-line order. */
  QpPlanMem *mem;
  /* What the ledger records for this VM. */
  GArray *claim_mem;        /* of QpNodeAmount */
  GArray *claim_huge;       /* of QpHugeClaim */
  hwloc_bitmap_t dedicated; /* CPUs this VM takes for itself */
  GArray *load;             /* of QpNodeLoad */
  GArray *cpu_load;         /* of QpCpuLoad: shared vCPUs per CPU set */
  GPtrArray *reasons;       /* of char*: each choice in plain words */
  GPtrArray *warnings;      /* of char* */
  /* Mode auto could not give what balanced or numa promise (the vCPUs do
   * not fit their CPUs) and placed the VM as well as it could: NOT_GIVEN
   * says what is missing, and one warning says it too. */
  gboolean best_effort;
  GPtrArray *not_given;      /* of char* */
  hwloc_bitmap_t host_nodes; /* host nodes the VM's vCPUs and memory use */
  /* Suggested guest topology: set only with opts->vnuma on a guest without
   * vNUMA. -smp sockets/cores/threads mirror the chosen CPUs, flat
   * (sockets=1, cores=N, threads=1) when their layout is asymmetric; their
   * product is n_vcpus (maxcpus), and the vnodes hold every vCPU. */
  gboolean vnuma;
  guint vnuma_sockets, vnuma_cores, vnuma_threads;
  guint n_vnodes; /* 0: no -numa node suggested (one host node) */
  QpPlanVnode *vnodes;
  guint *vnode_distance; /* n_vnodes * n_vnodes, SLIT of the host nodes */
  /* one-to-one with hot-pluggable vCPUs (maxcpus > vcpus): cores are
   * dedicated to the boot vCPUs only; a vCPU plugged later takes the first
   * of these cores (usable PUs of each, in order of preference) that no VM
   * holds then, claimed by the keeper; without one it shares the VM's own
   * cores (vcpu_cpus of a hot-pluggable vCPU). */
  guint n_boot_vcpus;
  GPtrArray *hotplug_cores; /* of hwloc_bitmap_t, or NULL */
} QpPlan;

/* Computes a plan. On a request that does not fit, fails with
 * QP_TOPOLOGY_ERROR_NOFIT and a message naming the node and the shortfall. */
QpPlan *qp_plan_compute(const QpHost *host, const QpClaims *claims,
                        const QpRequest *req, const QpPlacementOptions *opts,
                        GError **error);
void qp_plan_free(QpPlan *plan);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QpPlan, qp_plan_free)

/* Splits NEED units over the node indexes SET (K of them) as the planner
 * does: even shares, the remainder on the first node, a node short of its
 * share (AVAIL, reduced) leaving the rest to the others; adds to CLAIM. The
 * caller has checked that SET holds NEED. */
void qp_plan_split_units(guint64 need, const guint *set, guint k,
                         guint64 *avail, guint64 *claim);

JsonNode *qp_plan_to_json(const QpPlan *plan);
char *qp_plan_to_human(const QpPlan *plan, const QpHost *host);

G_END_DECLS
