/* Where the guest's memory is claimed (topology/plan/memory.c). */
#pragma once

#include "topology/plan/internal.h"

G_BEGIN_DECLS

/* What a mode claims: units per class and node, and per piece and node. */
typedef struct {
  guint64 *claim;   /* ncls * nn, AT() */
  guint64 *piece;   /* one row of nn per piece */
  guint *load;      /* shared vCPUs per node index */
  gboolean unbound; /* memory claimed but not bound (one-to-one, no vNUMA) */
} Acc;

void qp_plan_acc_init(Acc *acc, const Ctx *ctx);
void qp_plan_acc_clear(Acc *acc);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Acc, qp_plan_acc_clear)

/* A copy of ctx->avail for one try (free with g_free). */
guint64 *qp_plan_avail_copy(const Ctx *ctx);
/* Uncommitted MiB of node I in AVAIL over the classes the guest uses. */
guint64 qp_plan_rank_mib(const Ctx *ctx, const guint64 *avail, guint i);
/* MIB in whole GiB, rounded to the nearest, as memory ranks: nodes of one
 * size less a few MiB of firmware and kernel reservations rank equal (a
 * floor put 32739 and 32768 MiB a GiB apart). */
static inline guint64
qp_plan_rank_round_gib(guint64 mib)
{
  return (mib + 512) / 1024;
}
/* qp_plan_rank_mib() of node I so rounded. */
guint64 qp_plan_rank_gib(const Ctx *ctx, const guint64 *avail, guint i);
/* TRUE when node I holds NEED (units per class) in AVAIL. */
gboolean qp_plan_fits(const Ctx *ctx, const guint64 *avail, guint i,
                      const guint64 *need);
/* The first class of NEED that node I cannot hold. */
guint qp_plan_short_class(const Ctx *ctx, const guint64 *avail, guint i,
                          const guint64 *need);

/* Claims piece X over the nodes SET (indexes) from AVAIL: even shares,
 * or with TIGHT the tightest node first. */
void qp_plan_take_piece(const Ctx *ctx, Acc *acc, guint64 *avail, guint x,
                        const guint *set, guint k, gboolean tight);
/* Claims piece X over SET for spread, the vCPUs on node HOME of it: HOME
 * takes all it can, the node that holds the rest most tightly the rest
 * (while none does, the roomiest all it has). */
void qp_plan_take_piece_home(const Ctx *ctx, Acc *acc, guint64 *avail, guint x,
                             const guint *set, guint k, guint home);
/* Node indexes of host-nodes NODES of WHO, checked against the host. */
gboolean qp_plan_node_indexes(const Ctx *ctx, hwloc_const_bitmap_t nodes,
                              const char *who, GArray **out, GError **error);
/* Claims every piece that has nodes it must go to (Piece.fixed). */
gboolean qp_plan_claim_all_fixed(const Ctx *ctx, Acc *acc, guint64 *avail,
                                 GError **error);
/* Units per class of the pieces of guest node GI (-1: every piece) that go
 * where the planner chooses (free with g_free). */
guint64 *qp_plan_free_need(const Ctx *ctx, int gi);
/* Claims the free pieces of guest node GI (-1: of the guest) on node I. */
void qp_plan_take_task_pieces(const Ctx *ctx, Acc *acc, guint64 *avail, int gi,
                              guint i);
/* A reason for each piece the caller bound itself (MODE: the mode's name),
 * which stays on its nodes and is claimed there. */
void qp_plan_reason_caller_pieces(QpPlan *plan, const Ctx *ctx,
                                  const char *mode);

G_END_DECLS
