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

/* What a mode claims: units per class and node, and per piece and node. */
typedef struct {
  guint64 *claim;   /* ncls * nn, AT() */
  guint64 *piece;   /* one row of nn per piece */
  guint *load;      /* shared vCPUs per node index */
  gboolean unbound; /* memory claimed but not bound (one-to-one, no vNUMA) */
} Acc;

void acc_init(Acc *acc, const Ctx *ctx);
void acc_clear(Acc *acc);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Acc, acc_clear)

/* ---- Helpers (topology/plan.c) ------------------------------------------ */

int node_index(const Ctx *ctx, int id);
int cpu_index(const Ctx *ctx, int id);
guint dist(const Ctx *ctx, guint a, guint b);
guint64 units_to_mib(const Ctx *ctx, guint c, guint64 units);
/* "8192 MiB" or "8192 MiB of 2048 KiB hugepages (4096 pages)" */
char *mem_phrase(const Ctx *ctx, guint c, guint64 units);
/* "(16124 MiB total, 12028 MiB claimed, 512 MiB reserved)": class C of
 * node index I. */
char *node_mem_detail(const Ctx *ctx, guint c, guint i);
/* What NEED (units per class) holds: "1024 MiB and 2048 MiB of 2048 KiB
 * hugepages (1024 pages)". */
char *need_phrase(const Ctx *ctx, const guint64 *need);
/* Uncommitted MiB of node I in AVAIL over the classes the guest uses. */
guint64 rank_mib(const Ctx *ctx, const guint64 *avail, guint i);
/* TRUE when node I holds NEED (units per class) in AVAIL. */
gboolean fits(const Ctx *ctx, const guint64 *avail, guint i,
              const guint64 *need);
/* The first class of NEED that node I cannot hold. */
guint short_class(const Ctx *ctx, const guint64 *avail, guint i,
                  const guint64 *need);
void add_reason(QpPlan *plan, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
void add_warning(QpPlan *plan, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

void attempt_init(Attempt *a, const Ctx *ctx, hwloc_const_bitmap_t usable);
void attempt_clear(Attempt *a, guint nn);

/* A copy of ctx->avail for one try (free with g_free). */
guint64 *avail_copy(const Ctx *ctx);
const Piece *piece_at(const Ctx *ctx, guint x);
char *gnode_name(const Ctx *ctx, int gi);
/* Node indexes of host-nodes NODES of WHO, checked against the host. */
gboolean node_indexes(const Ctx *ctx, hwloc_const_bitmap_t nodes,
                      const char *who, GArray **out, GError **error);
/* Claims every piece that has nodes it must go to (Piece.fixed). */
gboolean claim_all_fixed(const Ctx *ctx, Acc *acc, guint64 *avail,
                         GError **error);
/* Units per class of the pieces of guest node GI (-1: every piece) that go
 * where the planner chooses (free with g_free). */
guint64 *free_need(const Ctx *ctx, int gi);
/* Claims the free pieces of guest node GI (-1: of the guest) on node I. */
void take_task_pieces(const Ctx *ctx, Acc *acc, guint64 *avail, int gi,
                      guint i);
/* Candidate nodes for node sets (--device-locality=required keeps only the
 * devices' nodes, and PREFIX then says so). */
gboolean *set_candidates(const Ctx *ctx, char **prefix);
char *scope_phrase(const Ctx *ctx, const Attempt *a, const gboolean *cand);
/* The plan's entry for piece X, bound to NODES (NULL: not bound), with
 * what ACC claimed for it. */
void add_plan_mem(QpPlan *plan, const Ctx *ctx, const Acc *acc, guint x,
                  hwloc_const_bitmap_t nodes);
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
