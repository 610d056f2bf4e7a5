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

/* The vCPUs float over the usable CPUs of the set's nodes, or of one cache
 * domain when they fit one; their load is split evenly over the nodes with
 * CPUs. */
static void
float_over_set(QpPlan *plan, const Ctx *ctx, const Attempt *a,
               const GuestSet *g, Acc *acc, gboolean *vm_nodes)
{
  plan->process_cpus = hwloc_bitmap_alloc();
  guint ncpu_nodes = 0;
  for (guint j = 0; j < g->k; j++) {
    guint i = g->nodes[j];
    hwloc_bitmap_or(plan->process_cpus, plan->process_cpus, a->node_cpus[i]);
    vm_nodes[i] = TRUE;
    if (a->n_cpus[i] > 0)
      ncpu_nodes++;
  }
  /* On one node, a VM that fits a cache domain floats inside one. */
  g_auto(hwloc_bitmap_t) domain =
      g->k == 1 ? qp_plan_cache_float_cpus(plan, ctx, a, g->nodes[0],
                                           plan->n_vcpus, "balanced")
                : NULL;
  for (guint v = 0; v < plan->n_vcpus; v++)
    plan->vcpu_cpus[v] =
        hwloc_bitmap_dup(domain != NULL ? domain : plan->process_cpus);
  guint seen = 0;
  for (guint j = 0; j < g->k && ncpu_nodes > 0; j++)
    if (a->n_cpus[g->nodes[j]] > 0) {
      acc->load[g->nodes[j]] =
          ctx->n / ncpu_nodes + (seen < ctx->n % ncpu_nodes ? 1 : 0);
      seen++;
    }
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
  /* Memory on the set, the caller's bindings kept. */
  for (guint x = 0; x < ctx->pieces->len; x++) {
    const Piece *p = qp_plan_piece_at(ctx, x);
    if (p->fixed != NULL) {
      qp_plan_add_mem(plan, ctx, &acc, x, p->fixed);
      continue;
    }
    qp_plan_take_piece(ctx, &acc, g.avail, x, g.nodes, g.k,
                       ctx->opts->strategy == QP_STRATEGY_PACK);
    qp_plan_add_mem(plan, ctx, &acc, x, g.ids);
  }
  g_autofree gboolean *vm_nodes = g_new0(gboolean, MAX(ctx->nn, 1));
  float_over_set(plan, ctx, a, &g, &acc, vm_nodes);
  qp_plan_finish_plan(plan, ctx, a, &acc, vm_nodes);
  return TRUE;
}
