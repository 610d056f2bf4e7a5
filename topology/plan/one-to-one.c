/* Mode one-to-one: a physical core per vCPU (SMT sibling pairs for a
 * guest with threads > 1), down the SMT ladder that --smt allows; without
 * vNUMA on the fewest nodes with the cores, with vNUMA per guest node
 * (numa.c). With hot-pluggable vCPUs, the free cores a vCPU plugged later
 * may take. */
#include "topology/plan/one-to-one.h"

#include <string.h>

#include "topology/plan/capacity.h"
#include "topology/plan/cache.h"
#include "topology/plan/cores.h"
#include "topology/plan/memory.h"
#include "topology/plan/node-sets.h"
#include "topology/plan/numa.h"
#include "topology/plan/phrases.h"
#include "topology/plan/result.h"

static gboolean
plan_o2o_flat(QpPlan *plan, const Ctx *ctx, Attempt *a, CapKind cap,
              GError **error)
{
  guint nn = ctx->nn;
  g_auto(Acc) acc;
  qp_plan_acc_init(&acc, ctx);
  acc.unbound = TRUE;
  g_auto(hwloc_bitmap_t) all = hwloc_bitmap_alloc();
  hwloc_bitmap_set_range(all, 0, (int)ctx->n - 1);
  guint units = qp_plan_task_units(ctx, cap, all);
  g_auto(GuestSet) g = {0};
  if (!qp_plan_guest_set_choose(&g, ctx, a, &acc, cap, units, error))
    return FALSE;
  const guint *nodes = g.nodes;
  guint k = g.k;
  guint64 need_mib = 0;
  for (guint c = 0; c < ctx->ncls; c++)
    need_mib += qp_plan_units_to_mib(ctx, c, g.need[c]);
  g_autofree char *l = qp_list_format(g.ids);
  if (need_mib > 0)
    qp_plan_add_reason(
        plan,
        "one-to-one: cores on host node%s %s: the fewest nodes (%u) "
        "with %u %s and %" G_GUINT64_FORMAT " MiB for the guest; "
        "memory is not bound (the guest has no vNUMA), it is claimed "
        "where the vCPUs run",
        k > 1 ? "s" : "", l, k, units, qp_plan_cap_unit_name(cap, units),
        need_mib);
  else
    qp_plan_add_reason(
        plan,
        "one-to-one: cores on host node%s %s: the fewest nodes (%u) "
        "with %u %s",
        k > 1 ? "s" : "", l, k, units, qp_plan_cap_unit_name(cap, units));
  qp_plan_reason_caller_pieces(plan, ctx, "one-to-one");

  /* Memory claimed (not bound) over the set; the caller's bindings kept. */
  for (guint x = 0; x < ctx->pieces->len; x++) {
    const Piece *p = qp_plan_piece_at(ctx, x);
    if (p->fixed == NULL)
      qp_plan_take_piece(ctx, &acc, g.avail, x, nodes, k, FALSE);
    qp_plan_add_mem(plan, ctx, &acc, x, p->fixed);
  }

  /* vCPUs (or sibling groups) split evenly over the nodes with cores,
   * remainder on the first, as the memory is; a node short of its share
   * leaves the rest to the others; a split over the same nodes that fills
   * fewer L3 domains wins. Each node gets a consecutive range. */
  g_autofree gboolean *vm_nodes = g_new0(gboolean, MAX(nn, 1));
  g_autofree guint64 *capv = g_new0(guint64, MAX(nn, 1));
  g_autofree guint64 *count = g_new0(guint64, MAX(nn, 1));
  g_autofree guint *cpu_nodes = g_new0(guint, MAX(k, 1));
  guint kc = 0;
  for (guint j = 0; j < k; j++)
    if (qp_plan_node_cap(a, cap, nodes[j]) > 0) {
      capv[nodes[j]] = qp_plan_node_cap(a, cap, nodes[j]);
      cpu_nodes[kc++] = nodes[j];
    }
  qp_plan_split_units(units, cpu_nodes, kc, capv, count);
  qp_plan_cache_split_units(ctx, a, cap, cpu_nodes, kc, count);
  guint next = 0;
  for (guint j = 0; j < kc && next < ctx->n; j++) {
    guint i = cpu_nodes[j];
    if (count[i] == 0)
      continue;
    vm_nodes[i] = TRUE;
    g_auto(hwloc_bitmap_t) vs = hwloc_bitmap_alloc();
    for (guint taken = 0; next < ctx->n && taken < count[i]; taken++) {
      guint end = next + 1;
      if (cap == CAP_GROUPS)
        end = MIN((next / ctx->threads + 1) * ctx->threads, ctx->n);
      hwloc_bitmap_set_range(vs, next, (int)end - 1);
      next = end;
    }
    qp_plan_pick_cores(plan, ctx, a, cap, i, vs);
    qp_plan_reason_cores(plan, ctx, i, vs, cap, "");
  }
  qp_plan_finish_plan(plan, ctx, a, &acc, vm_nodes);
  return TRUE;
}

/* --smt=prefer fell back to siblings: the warning names the vCPUs that
 * share a physical core. */
static void
warn_shared_siblings(QpPlan *plan, const Ctx *ctx)
{
  g_auto(hwloc_bitmap_t) shared = hwloc_bitmap_alloc();
  for (guint v = 0; v < plan->n_vcpus; v++)
    for (guint w = 0; w < plan->n_vcpus; w++) {
      if (v == w || plan->vcpu_cpus[v] == NULL || plan->vcpu_cpus[w] == NULL)
        continue;
      int cv = qp_plan_cpu_index(ctx, hwloc_bitmap_first(plan->vcpu_cpus[v]));
      int cw = qp_plan_cpu_index(ctx, hwloc_bitmap_first(plan->vcpu_cpus[w]));
      if (cv >= 0 && cw >= 0 &&
          ctx->host->cpus[cv].core == ctx->host->cpus[cw].core) {
        hwloc_bitmap_set(shared, v);
        break;
      }
    }
  g_autofree char *sl = qp_list_format(shared);
  if (!hwloc_bitmap_iszero(shared))
    qp_plan_add_warning(
        plan,
        "one-to-one: not enough free cores for %u vCPUs: vCPUs "
        "%s share physical cores as SMT siblings (--smt=prefer; "
        "--smt=strict refuses this)",
        ctx->n, sl);
}

/* What the rung CAP that fitted gives up, or how it keeps the guest's
 * siblings. */
static void
note_rung(QpPlan *plan, const Ctx *ctx, CapKind cap)
{
  if (cap == CAP_PUS)
    warn_shared_siblings(plan, ctx);
  if (cap == CAP_CORES && ctx->threads > 1)
    qp_plan_add_warning(
        plan,
        "one-to-one: the guest has threads=%u but too few free "
        "cores have %u usable SMT siblings: each vCPU gets a core "
        "of its own, so the guest's sibling threads are not "
        "siblings on the host",
        ctx->threads, ctx->threads);
  if (cap == CAP_GROUPS)
    qp_plan_add_reason(plan,
                       "one-to-one: the guest has threads=%u, so vCPUs "
                       "%u*k..%u*k+%u share one physical core as SMT siblings",
                       ctx->threads, ctx->threads, ctx->threads,
                       ctx->threads - 1);
}

/* Throws away what a rung wrote, so that the next starts clean. */
static void
clear_rung(QpPlan *plan, const Ctx *ctx, Attempt *a)
{
  memset(a->core_used, 0, MAX(ctx->host->n_cores, 1) * sizeof(gboolean));
  hwloc_bitmap_zero(a->taken);
  hwloc_bitmap_zero(plan->dedicated);
  for (guint v = 0; v < plan->n_vcpus; v++)
    g_clear_pointer(&plan->vcpu_cpus[v], hwloc_bitmap_free);
  qp_plan_mem_drop(plan);
  g_ptr_array_set_size(plan->reasons, 0);
  g_ptr_array_set_size(plan->warnings, 0);
}

gboolean
qp_plan_o2o(QpPlan *plan, const Ctx *ctx, Attempt *a, GError **error)
{
  gboolean vnuma = ctx->req->n_gnodes > 0;
  CapKind ladder[3];
  guint n = 0;
  if (ctx->threads > 1)
    ladder[n++] = CAP_GROUPS;
  if (ctx->threads == 1 || ctx->opts->smt == QP_SMT_PREFER)
    ladder[n++] = CAP_CORES;
  if (ctx->opts->smt == QP_SMT_PREFER && ctx->threads == 1)
    ladder[n++] = CAP_PUS;

  /* The last rung's shortfall is the one that matters. */
  g_autoptr(GError) last = NULL;
  for (guint r = 0; r < n; r++) {
    g_clear_error(&last);
    clear_rung(plan, ctx, a);
    gboolean ok = vnuma ? qp_plan_by_gnode(plan, ctx, a, TRUE, ladder[r], &last)
                        : plan_o2o_flat(plan, ctx, a, ladder[r], &last);
    if (ok) {
      note_rung(plan, ctx, ladder[r]);
      return TRUE;
    }
  }
  clear_rung(plan, ctx, a);
  if (ctx->opts->smt == QP_SMT_STRICT && ctx->threads == 1 &&
      !qp_plan_error_is_memory(last))
    g_propagate_prefixed_error(error, g_steal_pointer(&last), "%s",
                               "--smt=strict: ");
  else
    g_propagate_error(error, g_steal_pointer(&last));
  return FALSE;
}

/* CPUs the VM may use at all: allowed, in --affinity, on --hostnodes. */
static hwloc_bitmap_t
usable_cpus(const QpHost *host, const QpPlacementOptions *opts)
{
  hwloc_bitmap_t set = hwloc_bitmap_dup(host->allowed);
  if (opts->affinity != NULL)
    hwloc_bitmap_and(set, set, opts->affinity);
  if (opts->hostnodes != NULL) {
    g_auto(hwloc_bitmap_t) on = hwloc_bitmap_alloc();
    for (guint i = 0; i < host->n_nodes; i++)
      if (hwloc_bitmap_isset(opts->hostnodes, (unsigned)host->nodes[i].id))
        hwloc_bitmap_or(on, on, host->nodes[i].all_cpus);
    hwloc_bitmap_and(set, set, on);
  }
  return set;
}

/* The cores a vCPU plugged later may take, best first: free cores of the
 * VM's own nodes, then of other nodes, of the kind the boot vCPUs run on. */
GPtrArray *
qp_plan_spare_cores(const QpHost *host, const QpClaims *claims,
                    const QpPlacementOptions *opts, const QpPlan *plan)
{
  GPtrArray *spare =
      g_ptr_array_new_with_free_func((GDestroyNotify)hwloc_bitmap_free);
  g_auto(hwloc_bitmap_t) usable = usable_cpus(host, opts);
  g_auto(hwloc_bitmap_t) taken = qp_claims_dedicated(claims);
  hwloc_bitmap_or(taken, taken, plan->dedicated);
  int first = hwloc_bitmap_first(plan->dedicated);
  int ci = first >= 0 ? qp_host_cpu_index(host, first) : -1;
  int kind = ci >= 0 ? host->cpus[ci].kind : -1;
  for (int pass = 0; pass < 2; pass++)
    for (guint c = 0; c < host->n_cores; c++) {
      const QpCore *core = &host->cores[c];
      gboolean own_node =
          core->node >= 0 &&
          hwloc_bitmap_isset(plan->host_nodes, (unsigned)core->node);
      if (own_node != (pass == 0) || hwloc_bitmap_intersects(core->pus, taken))
        continue;
      hwloc_bitmap_t pus = hwloc_bitmap_dup(core->pus);
      hwloc_bitmap_and(pus, pus, usable);
      int p0 = hwloc_bitmap_first(pus);
      int pi = p0 >= 0 ? qp_host_cpu_index(host, p0) : -1;
      if (p0 < 0 || (kind >= 0 && pi >= 0 && host->cpus[pi].kind != kind)) {
        hwloc_bitmap_free(pus);
        continue;
      }
      g_ptr_array_add(spare, pus);
    }
  return spare;
}
