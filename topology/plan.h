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
  guint64 mem_mib;           /* memory of the node */
  char *memdev;              /* backend id, NULL if none */
  hwloc_bitmap_t host_nodes; /* caller's host-nodes, NULL if unset */
  QpPolicy policy;           /* caller's policy, DEFAULT if unset */
} QpGuestNode;

typedef struct {
  guint vcpus;   /* boot vCPUs */
  guint maxcpus; /* >= vcpus */
  guint sockets, dies, clusters, cores, threads;
  guint64 mem_mib;
  guint n_gnodes; /* 0: no vNUMA */
  QpGuestNode *gnodes;
  guint *gdistance;     /* n_gnodes * n_gnodes from -numa dist, or NULL */
  guint64 hugepage_kib; /* 0: no hugepages */
  gboolean prealloc;
  char **vfio; /* NULL-terminated host BDFs of -device vfio-pci */
  guint n_iothreads;
  /* A guest without vNUMA: the caller's host-nodes and policy of its RAM
   * backend (-machine memory-backend=), NULL / DEFAULT if unset. */
  hwloc_bitmap_t host_nodes;
  QpPolicy policy;
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

typedef struct {
  int gnode;                 /* guest node id, -1 for a guest without vNUMA */
  hwloc_bitmap_t host_nodes; /* where its memory is bound */
  QpPolicy policy;
  guint64 mem_mib;
  char *memdev;        /* the caller's backend id, or NULL */
  gboolean caller_set; /* caller's host-nodes kept as they were */
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
  QpPlanMem *mem; /* one per guest node, or one for the guest */
  /* What the ledger records for this VM. */
  GArray *claim_mem;        /* of QpNodeAmount */
  GArray *claim_huge;       /* of QpHugeClaim */
  hwloc_bitmap_t dedicated; /* CPUs this VM takes for itself */
  GArray *load;             /* of QpNodeLoad */
  GPtrArray *reasons;       /* of char*: each choice in plain words */
  GPtrArray *warnings;      /* of char* */
  /* Additions (planner). */
  hwloc_bitmap_t host_nodes; /* host nodes the VM's vCPUs and memory use */
  /* Suggested guest topology: set only with opts->vnuma on a guest without
   * vNUMA. -smp sockets/cores/threads mirror the chosen CPUs, flat
   * (sockets=1, cores=N, threads=1) when their layout is asymmetric. */
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

JsonNode *qp_plan_to_json(const QpPlan *plan);
char *qp_plan_to_human(const QpPlan *plan, const QpHost *host);

G_END_DECLS
