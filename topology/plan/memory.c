/* Where the guest's memory is claimed: what a node holds, the split of a
 * piece over a node set, and the pieces that must go to nodes of their
 * own (the caller's host-nodes). */
#include "topology/plan/memory.h"

#include "topology/plan/phrases.h"
#include "topology/plan/result.h"

/* Memory of node I that counts when ranking nodes: the uncommitted MiB of
 * every class the guest uses. */
guint64
qp_plan_rank_mib(const Ctx *ctx, const guint64 *avail, guint i)
{
  guint64 mib = 0;
  for (guint c = 0; c < ctx->ncls; c++)
    if (ctx->cls_used[c])
      mib += qp_plan_units_to_mib(ctx, c, avail[AT(ctx, c, i)]);
  return mib;
}

guint64
qp_plan_rank_gib(const Ctx *ctx, const guint64 *avail, guint i)
{
  return qp_plan_rank_round_gib(qp_plan_rank_mib(ctx, avail, i));
}

/* The first class of NEED that node I cannot hold in AVAIL; ncls when it
 * holds every class. */
static guint
first_short(const Ctx *ctx, const guint64 *avail, guint i, const guint64 *need)
{
  for (guint c = 0; c < ctx->ncls; c++)
    if (avail[AT(ctx, c, i)] < need[c])
      return c;
  return ctx->ncls;
}

gboolean
qp_plan_fits(const Ctx *ctx, const guint64 *avail, guint i, const guint64 *need)
{
  return first_short(ctx, avail, i, need) == ctx->ncls;
}

guint
qp_plan_short_class(const Ctx *ctx, const guint64 *avail, guint i,
                    const guint64 *need)
{
  guint c = first_short(ctx, avail, i, need);
  return c < ctx->ncls ? c : 0;
}

/* Takes what is left of LEFT units from the nodes of SET in order, each
 * as far as it holds. Returns what no node could take. */
static guint64
fill_in_order(guint64 left, const guint *set, guint k, guint64 *avail,
              guint64 *claim)
{
  for (guint j = 0; j < k && left > 0; j++) {
    guint64 take = MIN(left, avail[set[j]]);
    avail[set[j]] -= take;
    claim[set[j]] += take;
    left -= take;
  }
  return left;
}

/* Splits NEED units over SET (node indexes): even shares with the remainder
 * on the first node; a node short of its share leaves the rest to the
 * others, in order. The caller has checked that SET holds NEED. */
void
qp_plan_split_units(guint64 need, const guint *set, guint k, guint64 *avail,
                    guint64 *claim)
{
  guint64 left = need;
  if (k == 0)
    return;
  for (guint j = 0; j < k; j++) {
    guint64 want = need / k + (j == 0 ? need % k : 0);
    guint64 take = MIN(want, avail[set[j]]);
    avail[set[j]] -= take;
    claim[set[j]] += take;
    left -= take;
  }
  fill_in_order(left, set, k, avail, claim);
}

static gint
by_avail(gconstpointer a, gconstpointer b, gpointer avail)
{
  guint64 x = ((const guint64 *)avail)[*(const guint *)a];
  guint64 y = ((const guint64 *)avail)[*(const guint *)b];
  return x < y ? -1 : x > y;
}

/* Pack: fills the set's nodes tightest first, so that what stays free
 * stays together on the others, where a later guest fits on one node.
 * Even shares would leave a fragment on every node of the set. */
static void
split_units_tight(guint64 need, const guint *set, guint k, guint64 *avail,
                  guint64 *claim)
{
  g_autofree guint *order = g_memdup2(set, sizeof(guint) * k);
  /* Stable: equal nodes keep the set's order. */
  g_qsort_with_data(order, (gint)k, sizeof(guint), by_avail, avail);
  fill_in_order(need, order, k, avail, claim);
}

/* Spread, a guest whose vCPUs run on node HOME of SET: HOME takes all it
 * can, then the node of SET that holds what is left most tightly takes it;
 * while no node holds it alone, the roomiest takes all it has (set order
 * on ties). So most of the guest is where its vCPUs are, as the kernel's
 * local-first bind puts it, and the rest on its best fit: what stays free
 * stays together, where even shares would leave a fragment on every node
 * of the set. The caller has checked that SET holds NEED. */
static void
split_units_home(guint64 need, const guint *set, guint k, guint home,
                 guint64 *avail, guint64 *claim)
{
  guint64 left = fill_in_order(need, &home, 1, avail, claim);
  while (left > 0) {
    int fit = -1, most = -1;
    for (guint j = 0; j < k; j++) {
      guint64 have = avail[set[j]];
      if (set[j] == home || have == 0)
        continue;
      if (have >= left && (fit < 0 || have < avail[set[fit]]))
        fit = (int)j;
      if (most < 0 || have > avail[set[most]])
        most = (int)j;
    }
    if (most < 0)
      break;
    left = fill_in_order(left, &set[fit >= 0 ? fit : most], 1, avail, claim);
  }
}

/* A copy of the uncommitted units per class and node, for one try. */
guint64 *
qp_plan_avail_copy(const Ctx *ctx)
{
  return g_memdup2(ctx->avail,
                   MAX((gsize)ctx->nn * ctx->ncls, 1) * sizeof(guint64));
}

void
qp_plan_acc_init(Acc *acc, const Ctx *ctx)
{
  guint nn = MAX(ctx->nn, 1);
  acc->claim = g_new0(guint64, (gsize)nn * ctx->ncls);
  acc->piece = g_new0(guint64, (gsize)nn * MAX(ctx->pieces->len, 1));
  acc->load = g_new0(guint, nn);
  acc->unbound = FALSE;
}

void
qp_plan_acc_clear(Acc *acc)
{
  g_free(acc->claim);
  g_free(acc->piece);
  g_free(acc->load);
}

/* Adds GOT (units per node index) of piece X to ACC. */
static void
acc_add_piece(const Ctx *ctx, Acc *acc, guint x, const guint64 *got)
{
  const Piece *p = qp_plan_piece_at(ctx, x);
  for (guint i = 0; i < ctx->nn; i++) {
    acc->piece[(gsize)x * ctx->nn + i] += got[i];
    acc->claim[AT(ctx, p->cls, i)] += got[i];
  }
}

/* Claims piece X over the nodes SET (indexes) from AVAIL: even shares,
 * or with TIGHT the tightest node first (see split_units_tight). */
void
qp_plan_take_piece(const Ctx *ctx, Acc *acc, guint64 *avail, guint x,
                   const guint *set, guint k, gboolean tight)
{
  const Piece *p = qp_plan_piece_at(ctx, x);
  g_autofree guint64 *got = g_new0(guint64, MAX(ctx->nn, 1));
  if (tight)
    split_units_tight(p->units, set, k, avail + AT(ctx, p->cls, 0), got);
  else
    qp_plan_split_units(p->units, set, k, avail + AT(ctx, p->cls, 0), got);
  acc_add_piece(ctx, acc, x, got);
}

void
qp_plan_take_piece_home(const Ctx *ctx, Acc *acc, guint64 *avail, guint x,
                        const guint *set, guint k, guint home)
{
  const Piece *p = qp_plan_piece_at(ctx, x);
  g_autofree guint64 *got = g_new0(guint64, MAX(ctx->nn, 1));
  split_units_home(p->units, set, k, home, avail + AT(ctx, p->cls, 0), got);
  acc_add_piece(ctx, acc, x, got);
}

/* Node indexes of host-nodes NODES of WHO, checked against the host. */
gboolean
qp_plan_node_indexes(const Ctx *ctx, hwloc_const_bitmap_t nodes,
                     const char *who, GArray **out, GError **error)
{
  g_autoptr(GArray) set = g_array_new(FALSE, FALSE, sizeof(guint));
  g_autofree char *list = qp_list_format(nodes);
  int id;
  hwloc_bitmap_foreach_begin(id, nodes)
  {
    int i = qp_plan_node_index(ctx, id);
    if (i < 0) {
      g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                  "host-nodes %s of %s: node %d does not exist on this host",
                  list, who, id);
      return FALSE;
    }
    if (ctx->claims != NULL && ctx->claims->blocked_nodes != NULL &&
        hwloc_bitmap_isset(ctx->claims->blocked_nodes, id)) {
      g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                  "host-nodes %s of %s: node %d is fully claimed (blocked by "
                  "an unreadable ledger record)",
                  list, who, id);
      return FALSE;
    }
    guint u = (guint)i;
    g_array_append_val(set, u);
  }
  hwloc_bitmap_foreach_end();
  *out = g_steal_pointer(&set);
  return TRUE;
}

/* Claims piece X on the nodes it must go to (Piece.fixed). The caller's
 * nodes outside --hostnodes are allowed: an explicit binding wins. */
static gboolean
claim_fixed(const Ctx *ctx, Acc *acc, guint64 *avail, guint x, GError **error)
{
  const Piece *p = qp_plan_piece_at(ctx, x);
  g_autofree char *who = qp_plan_piece_name(ctx, p);
  g_autoptr(GArray) set = NULL;
  if (!qp_plan_node_indexes(ctx, p->fixed, who, &set, error))
    return FALSE;
  guint64 have = 0;
  guint best = g_array_index(set, guint, 0);
  for (guint j = 0; j < set->len; j++) {
    guint i = g_array_index(set, guint, j);
    have += avail[AT(ctx, p->cls, i)];
    if (avail[AT(ctx, p->cls, i)] > avail[AT(ctx, p->cls, best)])
      best = i;
  }
  if (have < p->units) {
    g_autofree char *list = qp_list_format(p->fixed);
    g_autofree char *need = qp_plan_mem_phrase(ctx, p->cls, p->units);
    g_autofree char *detail = qp_plan_node_mem_detail(ctx, p->cls, best);
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                "%s needs %s on %s %s but node %d has only "
                "%" G_GUINT64_FORMAT " MiB uncommitted %s",
                who, need,
                p->caller_set ? "its host-nodes" : "the host-nodes of its RAM",
                list, ctx->host->nodes[best].id,
                qp_plan_units_to_mib(ctx, p->cls, avail[AT(ctx, p->cls, best)]),
                detail);
    return FALSE;
  }
  qp_plan_take_piece(ctx, acc, avail, x, (const guint *)(void *)set->data,
                     set->len, FALSE);
  return TRUE;
}

/* Claims every piece that has nodes it must go to. */
gboolean
qp_plan_claim_all_fixed(const Ctx *ctx, Acc *acc, guint64 *avail,
                        GError **error)
{
  for (guint x = 0; x < ctx->pieces->len; x++)
    if (qp_plan_piece_at(ctx, x)->fixed != NULL &&
        !claim_fixed(ctx, acc, avail, x, error))
      return FALSE;
  return TRUE;
}

/* Units per class of the pieces of guest node GI (-1: every piece) that
 * go where the planner chooses. */
guint64 *
qp_plan_free_need(const Ctx *ctx, int gi)
{
  guint64 *need = g_new0(guint64, ctx->ncls);
  for (guint x = 0; x < ctx->pieces->len; x++) {
    const Piece *p = qp_plan_piece_at(ctx, x);
    if (p->fixed == NULL && (gi < 0 || p->gi == gi || p->gi < 0))
      need[p->cls] += p->units;
  }
  return need;
}

/* Claims the free pieces of guest node GI (-1: of the guest) on node I. */
void
qp_plan_take_task_pieces(const Ctx *ctx, Acc *acc, guint64 *avail, int gi,
                         guint i)
{
  for (guint x = 0; x < ctx->pieces->len; x++) {
    const Piece *p = qp_plan_piece_at(ctx, x);
    if (p->fixed == NULL && p->gi == gi)
      qp_plan_take_piece(ctx, acc, avail, x, &i, 1, FALSE);
  }
}

/* A reason for each piece the caller bound itself (MODE: the mode's name),
 * which stays on its nodes and is claimed there. */
void
qp_plan_reason_caller_pieces(QpPlan *plan, const Ctx *ctx, const char *mode)
{
  for (guint x = 0; x < ctx->pieces->len; x++) {
    const Piece *p = qp_plan_piece_at(ctx, x);
    if (!p->caller_set)
      continue;
    g_autofree char *who = qp_plan_piece_name(ctx, p);
    g_autofree char *cl = qp_list_format(p->fixed);
    qp_plan_add_reason(
        plan,
        "%s: the memory of %s stays on host node%s %s, where the "
        "caller bound it, and is claimed there",
        mode, who, hwloc_bitmap_weight(p->fixed) > 1 ? "s" : "", cl);
  }
}
