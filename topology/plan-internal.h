/* The planner's insides, shared by its files (topology/plan*.c): the
 * context of one plan, one try on a set of CPUs, and the helpers every mode
 * uses. Not for use outside the planner. */
#pragma once

#include "topology/plan.h"

G_BEGIN_DECLS

/* ---- Context ------------------------------------------------------------ */

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
  guint n;               /* vCPUs planned: maxcpus */
  guint threads;         /* guest threads per core, >= 1 */
  guint nn;              /* host->n_nodes */
  guint64 unit_kib;      /* memory unit: 1024 (MiB) or the hugepage size */
  gboolean *node_ok;     /* may be used: in --hostnodes, allowed, not blocked */
  gboolean *device_node; /* holds a vfio device of the guest */
  gboolean any_device_node;
  guint64 *avail;       /* uncommitted memory units */
  guint64 *total_units; /* for messages: memory (or pool) of the node */
  guint64 *claimed_units;
  guint64 *reserve_units;
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

/* A share of the guest's memory: one per guest node, or the whole guest. */
typedef struct {
  int gnode_index; /* index into req->gnodes, -1 for the whole guest */
  guint64 mem_mib;
  guint64 units;
  const char *memdev;
  hwloc_const_bitmap_t caller_nodes;
  QpPolicy caller_policy;
} MemItem;

/* What a mode accumulates for the claims. */
typedef struct {
  guint64 *claim; /* units per node index */
  guint *load;    /* shared vCPUs per node index */
} Acc;

/* ---- Helpers (topology/plan.c) ------------------------------------------ */

int node_index(const Ctx *ctx, int id);
int cpu_index(const Ctx *ctx, int id);
guint dist(const Ctx *ctx, guint a, guint b);
guint64 units_to_mib(const Ctx *ctx, guint64 units);
char *mem_phrase(const Ctx *ctx, guint64 units);
char *node_mem_detail(const Ctx *ctx, guint i);
void add_reason(QpPlan *plan, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
void add_warning(QpPlan *plan, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

void attempt_init(Attempt *a, const Ctx *ctx, hwloc_const_bitmap_t usable);
void attempt_clear(Attempt *a, guint nn);

void split_units(guint64 need, const guint *set, guint k, guint64 *avail,
                 guint64 *claim);
GArray *build_mem_items(const Ctx *ctx);
char *gnode_name(const Ctx *ctx, int gi);
gboolean caller_node_indexes(const Ctx *ctx, const MemItem *it, GArray **out,
                             GError **error);
gboolean claim_caller_mem(const Ctx *ctx, const MemItem *it, guint64 *avail,
                          guint64 *claim, GError **error);
/* Candidate nodes for node sets (--device-locality=required keeps only the
 * devices' nodes, and PREFIX then says so). */
gboolean *set_candidates(const Ctx *ctx, char **prefix);
char *scope_phrase(const Ctx *ctx, const Attempt *a, const gboolean *cand);
void add_plan_mem(QpPlan *plan, const Ctx *ctx, const MemItem *it,
                  hwloc_const_bitmap_t nodes, gboolean caller_set);
hwloc_bitmap_t ids_of(const Ctx *ctx, const guint *nodes, guint k);
void finish_plan(QpPlan *plan, const Ctx *ctx, const Attempt *a, const Acc *acc,
                 const gboolean *vm_nodes);

/* Balanced on A: the fewest nodes holding the memory and CPU_NEED usable
 * CPUs (the vCPUs, or fewer when the placement is best effort). */
gboolean plan_balanced(QpPlan *plan, const Ctx *ctx, Attempt *a, guint cpu_need,
                       GError **error);

/* ---- Best effort (topology/plan-best-effort.c) -------------------------- */

/* Mode auto when the vCPUs do not fit what balanced or numa (PLAN->mode)
 * would give: widens the placement over more CPUs, sharing them, and says
 * in one warning what it could not give. Fails only for memory and for
 * options that leave no CPU at all. */
gboolean plan_best_effort(QpPlan *plan, const Ctx *ctx, GError **error);

/* Fills PLAN->cpu_load from its shared vCPUs (not one-to-one): the vCPUs
 * with the same CPU set, per set. */
void plan_fill_cpu_load(QpPlan *plan);

G_END_DECLS
