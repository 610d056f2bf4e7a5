/* Cores given to vCPUs, shared by one-to-one with and without vNUMA
 * (one-to-one.c, numa.c): a PU per vCPU on free cores in cache order, and
 * the reason that says which. */
#include "topology/plan/cores.h"

#include "topology/plan/cache.h"
#include "topology/plan/result.h"

/* vCPU V runs on PU, of core CORE, which the VM now holds whole. */
static void
give_pu(QpPlan *plan, const Ctx *ctx, Attempt *a, int v, int pu, int core)
{
  plan->vcpu_cpus[v] = hwloc_bitmap_alloc();
  hwloc_bitmap_set(plan->vcpu_cpus[v], pu);
  hwloc_bitmap_set(a->taken, pu);
  hwloc_bitmap_or(plan->dedicated, plan->dedicated, ctx->host->cores[core].pus);
}

/* The next unused core of CORES (of node index I) from position *C on with
 * THREADS usable PUs, marked used; -1 if none. */
static int
next_group_core(const Ctx *ctx, Attempt *a, const GArray *cores, guint i,
                guint *c)
{
  g_auto(hwloc_bitmap_t) pus = hwloc_bitmap_alloc();
  for (; *c < cores->len; (*c)++) {
    guint ci = g_array_index(cores, guint, *c);
    hwloc_bitmap_and(pus, ctx->host->cores[ci].pus, a->node_cpus[i]);
    if (!a->core_used[ci] && (guint)hwloc_bitmap_weight(pus) >= ctx->threads) {
      a->core_used[ci] = TRUE;
      return (int)ci;
    }
  }
  return -1;
}

/* CAP_GROUPS: each group of THREADS consecutive vCPUs on the SMT siblings
 * of one core of node index I, in order. */
static void
pick_sibling_groups(QpPlan *plan, const Ctx *ctx, Attempt *a, guint i,
                    hwloc_const_bitmap_t vcpus)
{
  g_autoptr(GArray) cores = qp_plan_cache_order_cores(
      ctx, a, CAP_GROUPS, i, qp_plan_task_units(ctx, CAP_GROUPS, vcpus));
  g_auto(hwloc_bitmap_t) pus = hwloc_bitmap_alloc();
  int last_group = -1, core = -1, v;
  guint c = 0;
  hwloc_bitmap_foreach_begin(v, vcpus)
  {
    int group = v / (int)ctx->threads;
    if (group != last_group) {
      core = next_group_core(ctx, a, cores, i, &c);
      last_group = group;
    }
    if (core < 0)
      continue; /* counted beforehand: cannot happen */
    hwloc_bitmap_and(pus, ctx->host->cores[core].pus, a->node_cpus[i]);
    int pu = hwloc_bitmap_first(pus);
    for (int skip = v % (int)ctx->threads; skip > 0 && pu >= 0; skip--)
      pu = hwloc_bitmap_next(pus, pu);
    give_pu(plan, ctx, a, v, pu, core);
  }
  hwloc_bitmap_foreach_end();
}

/* Picks one PU per vCPU of VCPUS on the cores of node index I, the fewest
 * cache domains first: sibling
 * groups (CAP_GROUPS), else one PU per core, first over unused cores; then
 * (CAP_PUS) the untaken siblings of this VM's cores, in core order. */
void
qp_plan_pick_cores(QpPlan *plan, const Ctx *ctx, Attempt *a, CapKind cap,
                   guint i, hwloc_const_bitmap_t vcpus)
{
  if (cap == CAP_GROUPS) {
    pick_sibling_groups(plan, ctx, a, i, vcpus);
    return;
  }
  const QpHost *host = ctx->host;
  /* Free cores in cache-domain order, the fewest domains first. */
  g_autoptr(GArray) cores = qp_plan_cache_order_cores(
      ctx, a, cap, i, qp_plan_task_units(ctx, cap, vcpus));
  g_auto(hwloc_bitmap_t) pus = hwloc_bitmap_alloc();
  int v;
  hwloc_bitmap_foreach_begin(v, vcpus)
  {
    int pu = -1, core = -1;
    for (guint c = 0; c < cores->len && pu < 0; c++) {
      guint ci = g_array_index(cores, guint, c);
      if (a->core_used[ci])
        continue;
      hwloc_bitmap_and(pus, host->cores[ci].pus, a->node_cpus[i]);
      pu = hwloc_bitmap_first(pus);
      core = (int)ci;
    }
    if (pu < 0 && cap == CAP_PUS)
      for (guint c = 0; c < cores->len && pu < 0; c++) {
        guint ci = g_array_index(cores, guint, c);
        hwloc_bitmap_and(pus, host->cores[ci].pus, a->node_cpus[i]);
        hwloc_bitmap_andnot(pus, pus, a->taken);
        pu = hwloc_bitmap_first(pus);
        core = (int)ci;
      }
    if (pu < 0)
      continue; /* counted beforehand: cannot happen */
    a->core_used[core] = TRUE;
    give_pu(plan, ctx, a, v, pu, core);
  }
  hwloc_bitmap_foreach_end();
}

/* "vCPUs 0-1 -> CPUs 0-1 on host node 0, one physical core each" */
void
qp_plan_reason_cores(QpPlan *plan, const Ctx *ctx, guint i,
                     hwloc_const_bitmap_t vcpus, CapKind cap, const char *who)
{
  g_auto(hwloc_bitmap_t) cpus = hwloc_bitmap_alloc();
  int v;
  hwloc_bitmap_foreach_begin(v, vcpus)
  {
    if (plan->vcpu_cpus[v] != NULL)
      hwloc_bitmap_or(cpus, cpus, plan->vcpu_cpus[v]);
  }
  hwloc_bitmap_foreach_end();
  g_autofree char *vl = qp_plan_vcpu_list(ctx, vcpus);
  g_autofree char *cl = qp_list_format(cpus);
  qp_plan_add_reason(plan, "%s%svCPUs %s -> CPUs %s on host node %d, %s", who,
                     *who ? " " : "", vl, cl, ctx->host->nodes[i].id,
                     cap == CAP_GROUPS ? "one physical core per sibling group"
                     : cap == CAP_PUS
                         ? "free cores first, then their siblings"
                         : "one physical core each, siblings left idle");
}
