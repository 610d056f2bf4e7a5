/* Mode balanced: the fewest close nodes holding the guest's memory and
 * CPUs; the vCPUs float over the chosen nodes' usable CPUs and the memory
 * is bound there. */
#include "topology/plan/balanced.h"

#include "topology/plan/cache.h"
#include "topology/plan/memory.h"
#include "topology/plan/node-sets.h"
#include "topology/plan/phrases.h"
#include "topology/plan/result.h"

/* Why the set G: its size, what it holds, and the devices on it. */
static void
reason_set(QpPlan *plan, const Ctx *ctx, const Attempt *a, const GuestSet *g,
           guint cpu_need)
{
  guint k = g->k;
  SetScore sc = qp_plan_score_set(&g->s, &(NodeSet){k, g->nodes});
  g_autofree char *l = qp_list_format(g->ids);
  g_autofree char *needp = qp_plan_need_phrase(ctx, g->need);
  qp_plan_add_reason(
      plan,
      "balanced: host node%s %s: the fewest nodes (%u) holding %s "
      "and %u CPUs (%" G_GUINT64_FORMAT " usable CPUs, %" G_GUINT64_FORMAT
      " MiB uncommitted), max "
      "distance %u, %s strategy",
      k > 1 ? "s" : "", l, k, needp, cpu_need, sc.cpus, sc.mem,
      k > 1 ? sc.max_d : 10, qp_strategy_name(ctx->opts->strategy));
  if (k > 1) {
    guint64 best_mem = 0;
    guint best_cpus = 0;
    for (guint i = 0; i < ctx->nn; i++)
      if (g->cand[i]) {
        best_mem = MAX(best_mem, qp_plan_rank_mib(ctx, g->avail, i));
        best_cpus = MAX(best_cpus, a->n_cpus[i]);
      }
    qp_plan_add_reason(plan,
                       "balanced: no single node holds the guest: the most "
                       "usable CPUs on one node are %u, the most uncommitted "
                       "memory %" G_GUINT64_FORMAT " MiB",
                       best_cpus, best_mem);
  }
  if (ctx->any_device_node && ctx->opts->device_locality != QP_DEVLOC_IGNORE)
    qp_plan_add_reason(plan,
                       "balanced: %u of the chosen nodes hold the guest's host "
                       "devices",
                       sc.devices);
}

/* TRUE when spread may place a guest that spans the set G by where its
 * vCPUs run: not with pack (which fills the tightest node first), nor with
 * a policy other than bind (interleave spreads the pages evenly whatever
 * runs where, and preferred may leave the set). */
static gboolean
places_by_vcpus(const Ctx *ctx, const GuestSet *g)
{
  return g->k > 1 && ctx->opts->strategy != QP_STRATEGY_PACK &&
         (ctx->opts->policy == QP_POLICY_DEFAULT ||
          ctx->opts->policy == QP_POLICY_BIND);
}

/* A guest that spans nodes for its memory alone: the roomiest node of the
 * set whose usable CPUs hold the vCPUs, where they float and most of the
 * memory goes (qp_plan_take_piece_home: with the memory bound to the set,
 * the kernel puts pages on the vCPUs' node first, then on the others, as
 * the claim does); -1 when no node holds the vCPUs. */
static int
home_node(const Ctx *ctx, const Attempt *a, const GuestSet *g, guint cpu_need)
{
  if (!places_by_vcpus(ctx, g))
    return -1;
  int home = -1;
  for (guint j = 0; j < g->k; j++) {
    guint i = g->nodes[j];
    if (a->n_cpus[i] < MAX(cpu_need, 1))
      continue;
    if (home < 0 || qp_plan_rank_mib(ctx, g->avail, i) >
                        qp_plan_rank_mib(ctx, g->avail, (guint)home))
      home = (int)i;
  }
  return home;
}

/* A guest that spans nodes for its vCPUs (HOME is -1): the node of the set
 * with usable CPUs that holds all its free memory most tightly, where that
 * memory is bound alone (the kernel then puts every page there, as the
 * claim says, and the set's other nodes keep their memory); -1 when none
 * holds it, and for a guest with vNUMA, whose guest nodes stay bound over
 * the set (on one host node they would tell the guest of a topology it
 * does not have). */
static int
memory_node(const Ctx *ctx, const Attempt *a, const GuestSet *g, int home)
{
  if (home >= 0 || ctx->req->n_gnodes > 0 || !places_by_vcpus(ctx, g))
    return -1;
  int best = -1;
  for (guint j = 0; j < g->k; j++) {
    guint i = g->nodes[j];
    if (a->n_cpus[i] == 0 || !qp_plan_fits(ctx, g->avail, i, g->need))
      continue;
    if (best < 0 || qp_plan_rank_mib(ctx, g->avail, i) <
                        qp_plan_rank_mib(ctx, g->avail, (guint)best))
      best = (int)i;
  }
  return best;
}

/* The vCPUs float over the usable CPUs of the set's nodes (of node HOME
 * alone when it is not -1), or of one cache domain when they fit one on a
 * single node; their load is split evenly over the nodes they float on. */
static void
float_over_set(QpPlan *plan, const Ctx *ctx, const Attempt *a,
               const GuestSet *g, int home, Acc *acc, gboolean *vm_nodes)
{
  guint one = home >= 0 ? (guint)home : 0;
  const guint *nodes = home >= 0 ? &one : g->nodes;
  guint k = home >= 0 ? 1 : g->k;
  plan->process_cpus = hwloc_bitmap_alloc();
  guint ncpu_nodes = 0;
  for (guint j = 0; j < k; j++) {
    guint i = nodes[j];
    hwloc_bitmap_or(plan->process_cpus, plan->process_cpus, a->node_cpus[i]);
    vm_nodes[i] = TRUE;
    if (a->n_cpus[i] > 0)
      ncpu_nodes++;
  }
  /* On one node, a VM that fits a cache domain floats inside one. */
  g_auto(hwloc_bitmap_t) domain =
      k == 1 ? qp_plan_cache_float_cpus(plan, ctx, a, nodes[0], plan->n_vcpus,
                                        "balanced")
             : NULL;
  for (guint v = 0; v < plan->n_vcpus; v++)
    plan->vcpu_cpus[v] =
        hwloc_bitmap_dup(domain != NULL ? domain : plan->process_cpus);
  guint seen = 0;
  for (guint j = 0; j < k && ncpu_nodes > 0; j++)
    if (a->n_cpus[nodes[j]] > 0) {
      acc->load[nodes[j]] =
          ctx->n / ncpu_nodes + (seen < ctx->n % ncpu_nodes ? 1 : 0);
      seen++;
    }
}

/* Why the memory of a guest whose vCPUs run on HOME is split as it is. */
static void
reason_home(QpPlan *plan, const Ctx *ctx, const GuestSet *g, guint home,
            const Acc *acc)
{
  g_autoptr(GString) rest = g_string_new(NULL);
  for (guint j = 0; j < g->k; j++) {
    guint i = g->nodes[j];
    guint64 mib = 0;
    for (guint c = 0; c < ctx->ncls; c++)
      mib += qp_plan_units_to_mib(ctx, c, acc->claim[AT(ctx, c, i)]);
    if (i != home && mib > 0)
      g_string_append_printf(rest, "%s%" G_GUINT64_FORMAT " MiB on node %d",
                             rest->len > 0 ? ", " : "", mib,
                             ctx->host->nodes[i].id);
  }
  guint64 home_mib = 0;
  for (guint c = 0; c < ctx->ncls; c++)
    home_mib += qp_plan_units_to_mib(ctx, c, acc->claim[AT(ctx, c, home)]);
  qp_plan_add_reason(plan,
                     "balanced: the vCPUs float over host node %d, whose CPUs "
                     "hold them: %" G_GUINT64_FORMAT
                     " MiB of the memory there, the rest where it fits most "
                     "tightly (%s), so that what stays free stays together",
                     ctx->host->nodes[home].id, home_mib, rest->str);
}

gboolean
qp_plan_balanced(QpPlan *plan, const Ctx *ctx, Attempt *a, guint cpu_need,
                 GError **error)
{
  g_auto(Acc) acc;
  qp_plan_acc_init(&acc, ctx);
  g_auto(GuestSet) g = {0};
  if (!qp_plan_guest_set_choose(&g, ctx, a, &acc, CAP_CPUS, cpu_need, error))
    return FALSE;
  reason_set(plan, ctx, a, &g, cpu_need);
  qp_plan_reason_caller_pieces(plan, ctx, "balanced");
  int home = home_node(ctx, a, &g, cpu_need);
  int mem = memory_node(ctx, a, &g, home);
  g_auto(hwloc_bitmap_t) mem_id = NULL;
  if (mem >= 0) {
    mem_id = hwloc_bitmap_alloc();
    hwloc_bitmap_set(mem_id, (unsigned)ctx->host->nodes[mem].id);
  }
  /* Memory on the set, the caller's bindings kept. */
  for (guint x = 0; x < ctx->pieces->len; x++) {
    const Piece *p = qp_plan_piece_at(ctx, x);
    if (p->fixed != NULL) {
      qp_plan_add_mem(plan, ctx, &acc, x, p->fixed);
      continue;
    }
    if (mem >= 0) {
      guint i = (guint)mem;
      qp_plan_take_piece(ctx, &acc, g.avail, x, &i, 1, FALSE);
      qp_plan_add_mem(plan, ctx, &acc, x, mem_id);
      continue;
    }
    /* Claimed as the kernel will place it: interleave spreads the pages
     * evenly over the nodes; preferred fills one node (the first of its
     * host-nodes, so it is bound to that one alone: where the vCPUs run,
     * else the set's first) and falls back to others; bind allocates on
     * the vCPUs' node first when they have one, else as --strategy says. */
    QpPolicy policy = ctx->opts->policy;
    int first = home >= 0 ? home : (int)g.nodes[0];
    if (policy == QP_POLICY_PREFERRED)
      qp_plan_take_piece_home(ctx, &acc, g.avail, x, g.nodes, g.k,
                              (guint)first);
    else if (home >= 0 && policy != QP_POLICY_INTERLEAVE)
      qp_plan_take_piece_home(ctx, &acc, g.avail, x, g.nodes, g.k, (guint)home);
    else
      qp_plan_take_piece(ctx, &acc, g.avail, x, g.nodes, g.k,
                         policy != QP_POLICY_INTERLEAVE &&
                             ctx->opts->strategy == QP_STRATEGY_PACK);
    /* Bound where it is claimed: a node of the set that the claim leaves
     * out (no room, its memory the host's reserve) must not be where the
     * kernel puts it, first of all for the vCPUs that run there. */
    g_auto(hwloc_bitmap_t) claimed = qp_plan_piece_ids(ctx, &acc, x);
    if (policy == QP_POLICY_PREFERRED) {
      hwloc_bitmap_zero(claimed);
      hwloc_bitmap_set(claimed, (unsigned)ctx->host->nodes[first].id);
    }
    qp_plan_add_mem(plan, ctx, &acc, x,
                    hwloc_bitmap_iszero(claimed) ? g.ids : claimed);
  }
  if (home >= 0)
    reason_home(plan, ctx, &g, (guint)home, &acc);
  if (mem >= 0)
    qp_plan_add_reason(plan,
                       "balanced: the vCPUs need the set's CPUs; the memory "
                       "is bound to host node %d alone, the one of the set "
                       "that holds it most tightly, so that the kernel puts "
                       "it where it is claimed",
                       ctx->host->nodes[mem].id);
  g_autofree gboolean *vm_nodes = g_new0(gboolean, MAX(ctx->nn, 1));
  float_over_set(plan, ctx, a, &g, home, &acc, vm_nodes);
  qp_plan_finish_plan(plan, ctx, a, &acc, vm_nodes);
  return TRUE;
}
