/* The planner's insides (topology/plan/): the context of one plan (the
 * host as this request sees it), the pieces of the guest's memory, and one
 * try on a set of CPUs. This header and the headers that include it (one
 * per file of the planner: memory.h, node-sets.h, cores.h, each mode's)
 * are the planner's own; every name they declare is qp_plan_*. Outside
 * plan/, the planner is plan.h, placement.h, request.h, capacity.h and
 * claim.h. */
#pragma once

#include "topology/plan/plan.h"

G_BEGIN_DECLS

typedef enum {
  CAP_CPUS,   /* usable CPUs: balanced, numa */
  CAP_CORES,  /* free cores, one PU each: one-to-one */
  CAP_GROUPS, /* free cores with `threads` usable PUs: one-to-one threads>1 */
  CAP_PUS,    /* usable PUs of free cores: one-to-one, --smt=prefer fallback */
} CapKind;

typedef struct {
  const QpHost *host;
  const QpClaims *claims;
  const QpRequest *req;
  const QpPlacementOptions *opts;
  guint n;       /* vCPUs planned: maxcpus */
  guint threads; /* guest threads per core, >= 1 */
  guint nn;      /* host->n_nodes */
  /* Memory classes: 0 is ordinary memory (units of MiB), then one per
   * hugepage size the guest uses (units of pages). Per-node arrays of
   * units hold ncls * nn values, class-major (AT()). */
  guint ncls;
  guint64 *cls_kib;      /* per class: 1024, or the page size */
  guint64 *cls_page;     /* per class: 0, or the page size */
  gboolean *cls_used;    /* the guest needs memory of the class */
  GArray *pieces;        /* of Piece: every piece of the guest's memory */
  gboolean *node_ok;     /* may be used: in --hostnodes, allowed, not blocked */
  gboolean *device_node; /* holds a vfio, storage or network device */
  gboolean any_device_node;
  guint64 *avail;       /* uncommitted memory units */
  guint64 *total_units; /* for messages: memory (or pool) of the node */
  guint64 *claimed_units;
  guint64 *reserve_units;
  /* Per node index, ordinary memory (MiB) of a live host: used outside any
   * claim, what the kernel can give now, outstanding claims (0 when not
   * measured). */
  guint64 *outside_mib;
  guint64 *can_give_mib;
  guint64 *outstanding_mib;
  guint *load; /* shared vCPUs of other VMs */
  hwloc_bitmap_t dedicated_others;
  hwloc_bitmap_t usable; /* before the kind restriction */
  int *cpu_idx;          /* CPU id -> index into host->cpus, -1 */
  int max_cpu_id;
  int *node_idx; /* node id -> index into host->nodes, -1 */
  int max_node_id;
  int *vcpu_gnode; /* vCPU -> index into req->gnodes (0 without) */
} Ctx;

/* One try on a set of CPUs (all usable CPUs, or those of one kind). */
typedef struct {
  hwloc_bitmap_t usable;
  hwloc_bitmap_t *node_cpus; /* per node index */
  guint *n_cpus;
  GArray **node_cores;   /* per node index: guint core indexes */
  guint *n_groups;       /* cores with >= threads usable PUs */
  guint *n_pus;          /* usable PUs on free cores */
  hwloc_bitmap_t taken;  /* PUs given to vCPUs of this plan */
  gboolean *core_used;   /* per core index */
  const char *kind_note; /* " of CPU kind N", or "" */
} Attempt;

/* A piece of the guest's memory: the RAM of a guest node (or of the whole
 * guest), a memory device, or a backend no one uses yet. */
typedef struct {
  int gi; /* index into req->gnodes, -1 for the whole guest */
  QpMemKind kind;
  guint cls; /* memory class */
  guint64 mem_mib;
  guint64 units;
  const char *memdev;
  const char *device;
  /* Nodes it must go to: the caller's host-nodes of its backend
   * (caller_set), else those of its guest node's RAM; NULL if free. */
  hwloc_const_bitmap_t fixed;
  gboolean caller_set;
  QpPolicy caller_policy;
} Piece;

/* Index of class C, node index I in a per-node array of units. */
#define AT(ctx, c, i) ((gsize)(c) * (ctx)->nn + (i))

/* Index of node id ID in host->nodes, of CPU id ID in host->cpus; -1. */
int qp_plan_node_index(const Ctx *ctx, int id);
int qp_plan_cpu_index(const Ctx *ctx, int id);
guint64 qp_plan_units_to_mib(const Ctx *ctx, guint c, guint64 units);

/* Fills CTX for a plan of REQ on HOST beside CLAIMS; notes about the
 * request (a vfio device without a node) go to NOTES' warnings. Fails for
 * --device-locality=required on a device it cannot place. Free with
 * qp_plan_ctx_clear() either way. */
gboolean qp_plan_ctx_init(Ctx *ctx, const QpHost *host, const QpClaims *claims,
                          const QpRequest *req, const QpPlacementOptions *opts,
                          QpPlan *notes, GError **error);
void qp_plan_ctx_clear(Ctx *ctx);

/* CPUs the VM may use when other VMs' dedicated cores count too: allowed,
 * in --affinity, on usable nodes. ctx->usable is this less those cores. */
hwloc_bitmap_t qp_plan_cpus_with_dedicated(const Ctx *ctx);

/* VCPUS, vCPU indexes of the request planned, as the caller's vCPU
 * indexes ("0-1,3"): a request of the boot vCPUs alone numbers them from
 * 0 (QpRequest's slot_of). */
char *qp_plan_vcpu_list(const Ctx *ctx, hwloc_const_bitmap_t vcpus);

const Piece *qp_plan_piece_at(const Ctx *ctx, guint x);

/* Candidate nodes for node sets (--device-locality=required keeps only the
 * devices' nodes, and PREFIX then says so). */
gboolean *qp_plan_set_candidates(const Ctx *ctx, char **prefix);

void qp_plan_attempt_init(Attempt *a, const Ctx *ctx,
                          hwloc_const_bitmap_t usable);
void qp_plan_attempt_clear(Attempt *a, guint nn);

/* CPU units of kind CAP node index I offers in A. */
guint qp_plan_node_cap(const Attempt *a, CapKind cap, guint i);
/* CPU units the vCPUs VCPUS need under CAP (sibling groups for
 * CAP_GROUPS, else one per vCPU). */
guint qp_plan_task_units(const Ctx *ctx, CapKind cap,
                         hwloc_const_bitmap_t vcpus);

G_END_DECLS
