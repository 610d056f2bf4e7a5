/* The plan a mode fills: its allocation, reasons and warnings, the entry
 * of each piece of memory, and what every mode derives at the end
 * (claims, emulator/iothread/startup CPUs, memory policy, CPU load). */
#include "topology/plan/result.h"
#include "topology/plan/devices.h"

#include <string.h>

#include "topology/plan/memory.h"

void
qp_plan_add_reason(QpPlan *plan, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_ptr_array_add(plan->reasons, g_strdup_vprintf(fmt, ap));
  va_end(ap);
}

void
qp_plan_add_warning(QpPlan *plan, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_ptr_array_add(plan->warnings, g_strdup_vprintf(fmt, ap));
  va_end(ap);
}

QpPlan *
qp_plan_new(guint n)
{
  QpPlan *plan = g_new0(QpPlan, 1);
  plan->n_vcpus = n;
  plan->vcpu_cpus = g_new0(hwloc_bitmap_t, MAX(n, 1));
  plan->claim_mem = g_array_new(FALSE, TRUE, sizeof(QpNodeAmount));
  plan->claim_huge = g_array_new(FALSE, TRUE, sizeof(QpHugeClaim));
  plan->load = g_array_new(FALSE, TRUE, sizeof(QpNodeLoad));
  plan->cpu_load = qp_cpu_load_array_new();
  plan->dedicated = hwloc_bitmap_alloc();
  plan->host_nodes = hwloc_bitmap_alloc();
  plan->reasons = g_ptr_array_new_with_free_func(g_free);
  plan->warnings = g_ptr_array_new_with_free_func(g_free);
  plan->not_given = g_ptr_array_new_with_free_func(g_free);
  plan->mem_policy = QP_POLICY_DEFAULT;
  return plan;
}

static void
plan_mem_clear(QpPlanMem *m)
{
  hwloc_bitmap_free(m->host_nodes);
  g_free(m->memdev);
  g_free(m->device);
  if (m->claim != NULL)
    g_array_unref(m->claim);
}

/* Drops every piece of memory the plan holds (a failed try). */
void
qp_plan_mem_drop(QpPlan *plan)
{
  for (guint i = 0; i < plan->n_mem; i++)
    plan_mem_clear(&plan->mem[i]);
  g_clear_pointer(&plan->mem, g_free);
  plan->n_mem = 0;
}

void
qp_plan_free(QpPlan *plan)
{
  if (plan == NULL)
    return;
  if (plan->vcpu_cpus != NULL)
    for (guint i = 0; i < plan->n_vcpus; i++)
      hwloc_bitmap_free(plan->vcpu_cpus[i]);
  g_free(plan->vcpu_cpus);
  hwloc_bitmap_free(plan->process_cpus);
  hwloc_bitmap_free(plan->emulator_cpus);
  hwloc_bitmap_free(plan->iothread_cpus);
  hwloc_bitmap_free(plan->startup_cpus);
  hwloc_bitmap_free(plan->mem_nodes);
  qp_plan_mem_drop(plan);
  if (plan->claim_mem != NULL)
    g_array_unref(plan->claim_mem);
  if (plan->claim_huge != NULL)
    g_array_unref(plan->claim_huge);
  hwloc_bitmap_free(plan->dedicated);
  if (plan->load != NULL)
    g_array_unref(plan->load);
  if (plan->cpu_load != NULL)
    g_array_unref(plan->cpu_load);
  if (plan->not_given != NULL)
    g_ptr_array_unref(plan->not_given);
  qp_claim_free(plan->ignored);
  if (plan->reasons != NULL)
    g_ptr_array_unref(plan->reasons);
  if (plan->warnings != NULL)
    g_ptr_array_unref(plan->warnings);
  hwloc_bitmap_free(plan->host_nodes);
  if (plan->devices != NULL)
    g_ptr_array_unref(plan->devices);
  if (plan->iothreads != NULL)
    g_ptr_array_unref(plan->iothreads);
  for (guint i = 0; i < plan->n_vnodes; i++)
    hwloc_bitmap_free(plan->vnodes[i].vcpus);
  g_free(plan->vnodes);
  g_free(plan->vnode_distance);
  if (plan->hotplug_cores != NULL)
    g_ptr_array_unref(plan->hotplug_cores);
  hwloc_bitmap_free(plan->boot_vcpus);
  g_free(plan);
}

gboolean
qp_plan_vcpu_boots(const QpPlan *plan, guint index)
{
  if (plan->boot_vcpus != NULL)
    return hwloc_bitmap_isset(plan->boot_vcpus, index);
  return index < plan->n_boot_vcpus;
}

static QpPolicy
bind_policy(const Ctx *ctx)
{
  return ctx->opts->policy == QP_POLICY_DEFAULT ? QP_POLICY_BIND
                                                : ctx->opts->policy;
}

/* The plan's entry for piece X, bound to NODES (NULL: not bound), with
 * what ACC claimed for it. */
void
qp_plan_add_mem(QpPlan *plan, const Ctx *ctx, const Acc *acc, guint x,
                hwloc_const_bitmap_t nodes)
{
  const Piece *p = qp_plan_piece_at(ctx, x);
  gboolean caller_set = p->caller_set && nodes == p->fixed;
  plan->mem = g_renew(QpPlanMem, plan->mem, plan->n_mem + 1);
  QpPlanMem *m = &plan->mem[plan->n_mem++];
  memset(m, 0, sizeof(*m));
  m->gnode = p->gi < 0 ? -1 : ctx->req->gnodes[p->gi].id;
  m->host_nodes = nodes != NULL ? hwloc_bitmap_dup(nodes) : NULL;
  m->policy = caller_set ? p->caller_policy : bind_policy(ctx);
  m->mem_mib = p->mem_mib;
  m->memdev = g_strdup(p->memdev);
  m->caller_set = caller_set;
  m->kind = p->kind;
  m->device = g_strdup(p->device);
  m->page_kib = ctx->cls_page[p->cls];
  m->claim = g_array_new(FALSE, FALSE, sizeof(QpNodeUnits));
  for (guint i = 0; i < ctx->nn; i++) {
    QpNodeUnits u = {ctx->host->nodes[i].id,
                     acc->piece[(gsize)x * ctx->nn + i]};
    if (u.units > 0)
      g_array_append_val(m->claim, u);
  }
}

void
qp_plan_add_mem_at_homes(QpPlan *plan, const Ctx *ctx, const Acc *acc,
                         const int *home)
{
  for (guint x = 0; x < ctx->pieces->len; x++) {
    const Piece *p = qp_plan_piece_at(ctx, x);
    int i = home[MAX(p->gi, 0)];
    if (p->fixed != NULL || i < 0) {
      qp_plan_add_mem(plan, ctx, acc, x, p->fixed);
    } else {
      guint u = (guint)i;
      g_auto(hwloc_bitmap_t) ids = qp_plan_ids_of(ctx, &u, 1);
      qp_plan_add_mem(plan, ctx, acc, x, ids);
    }
  }
}

hwloc_bitmap_t
qp_plan_piece_ids(const Ctx *ctx, const Acc *acc, guint x)
{
  hwloc_bitmap_t ids = hwloc_bitmap_alloc();
  for (guint i = 0; i < ctx->nn; i++)
    if (acc->piece[(gsize)x * ctx->nn + i] > 0)
      hwloc_bitmap_set(ids, (unsigned)ctx->host->nodes[i].id);
  return ids;
}

hwloc_bitmap_t
qp_plan_ids_of(const Ctx *ctx, const guint *nodes, guint k)
{
  hwloc_bitmap_t b = hwloc_bitmap_alloc();
  for (guint j = 0; j < k; j++)
    hwloc_bitmap_set(b, ctx->host->nodes[nodes[j]].id);
  return b;
}

/* Largest same-kind subset of SET (the most performant kind on a tie). */
static hwloc_bitmap_t
largest_kind_subset(const Ctx *ctx, hwloc_const_bitmap_t set)
{
  guint nk = MAX(ctx->host->n_kinds, 1);
  g_autofree guint *count = g_new0(guint, nk);
  int id;
  hwloc_bitmap_foreach_begin(id, set)
  {
    int ci = qp_plan_cpu_index(ctx, id);
    int k = ci >= 0 ? ctx->host->cpus[ci].kind : 0;
    if (k >= 0 && (guint)k < nk)
      count[k]++;
  }
  hwloc_bitmap_foreach_end();
  guint best = nk - 1;
  for (guint k = nk; k-- > 0;)
    if (count[k] > count[best])
      best = k;
  hwloc_bitmap_t r = hwloc_bitmap_alloc();
  hwloc_bitmap_foreach_begin(id, set)
  {
    int ci = qp_plan_cpu_index(ctx, id);
    int k = ci >= 0 ? ctx->host->cpus[ci].kind : 0;
    if ((guint)MAX(k, 0) == best || nk == 1)
      hwloc_bitmap_set(r, id);
  }
  hwloc_bitmap_foreach_end();
  return r;
}

/* Fills claims, emulator/iothread/startup sets and host_nodes from what the
 * mode decided (vcpu_cpus, process_cpus, dedicated, mem, ACC). VM_NODES are
 * the node indexes whose CPUs the VM uses. */
void
qp_plan_finish_plan(QpPlan *plan, const Ctx *ctx, const Attempt *a,
                    const Acc *acc, const gboolean *vm_nodes)
{
  for (guint i = 0; i < ctx->nn; i++) {
    int id = ctx->host->nodes[i].id;
    for (guint c = 0; c < ctx->ncls; c++) {
      guint64 units = acc->claim[AT(ctx, c, i)];
      if (units == 0)
        continue;
      hwloc_bitmap_set(plan->host_nodes, id);
      if (c == 0) {
        QpNodeAmount m = {.node = id, .mib = units};
        g_array_append_val(plan->claim_mem, m);
      } else {
        QpHugeClaim h = {
            .node = id, .page_kib = ctx->cls_page[c], .pages = units};
        g_array_append_val(plan->claim_huge, h);
      }
    }
    if (acc->load[i] > 0) {
      QpNodeLoad l = {.node = id, .vcpus = acc->load[i]};
      g_array_append_val(plan->load, l);
    }
    if (vm_nodes[i])
      hwloc_bitmap_set(plan->host_nodes, id);
  }

  /* Emulator and iothreads: the VM's nodes' usable CPUs off its dedicated
   * cores, when any are left; else the VM's own CPUs. */
  g_auto(hwloc_bitmap_t) vm_cpus = hwloc_bitmap_alloc();
  for (guint v = 0; v < plan->n_vcpus; v++)
    hwloc_bitmap_or(vm_cpus, vm_cpus, plan->vcpu_cpus[v]);
  g_auto(hwloc_bitmap_t) around = hwloc_bitmap_alloc();
  for (guint i = 0; i < ctx->nn; i++)
    if (vm_nodes[i])
      hwloc_bitmap_or(around, around, a->node_cpus[i]);
  hwloc_bitmap_andnot(around, around, plan->dedicated);
  if (hwloc_bitmap_iszero(around)) {
    hwloc_bitmap_copy(around, vm_cpus);
    qp_plan_add_reason(plan,
                       "emulator and iothreads share the vCPUs' CPUs: no other "
                       "usable CPU is left on the VM's nodes");
  } else if (!hwloc_bitmap_iszero(plan->dedicated)) {
    g_autofree char *l = qp_list_format(around);
    qp_plan_add_reason(plan,
                       "emulator and iothreads on %s: the VM's nodes, off its "
                       "dedicated cores",
                       l);
  }
  plan->emulator_cpus = hwloc_bitmap_dup(around);
  plan->iothread_cpus = hwloc_bitmap_dup(around);
  if (plan->process_cpus == NULL) {
    plan->process_cpus = hwloc_bitmap_dup(vm_cpus);
    hwloc_bitmap_or(plan->process_cpus, plan->process_cpus, around);
  }
  plan->startup_cpus = largest_kind_subset(ctx, plan->process_cpus);
  if (ctx->host->n_kinds > 1 &&
      !hwloc_bitmap_isequal(plan->startup_cpus, plan->process_cpus)) {
    g_autofree char *l = qp_list_format(plan->startup_cpus);
    qp_plan_add_reason(plan,
                       "startup CPUs %s: the largest same-kind subset of the "
                       "process CPUs",
                       l);
  }

  if (plan->n_mem > 0 && !acc->unbound) {
    plan->mem_nodes = hwloc_bitmap_alloc();
    for (guint m = 0; m < plan->n_mem; m++)
      if (plan->mem[m].host_nodes != NULL)
        hwloc_bitmap_or(plan->mem_nodes, plan->mem_nodes,
                        plan->mem[m].host_nodes);
    plan->mem_policy = bind_policy(ctx);
  }
  qp_plan_devices(plan, ctx, a);
  qp_plan_fill_cpu_load(plan);
}

void
qp_plan_fill_cpu_load(QpPlan *plan)
{
  if (plan->mode == QP_MODE_ONE_TO_ONE || plan->mode == QP_MODE_NONE)
    return;
  for (guint v = 0; v < plan->n_vcpus; v++) {
    hwloc_const_bitmap_t set = plan->vcpu_cpus[v];
    if (set == NULL || hwloc_bitmap_iszero(set))
      continue;
    gboolean found = FALSE;
    for (guint g = 0; g < plan->cpu_load->len && !found; g++) {
      QpCpuLoad *l = &g_array_index(plan->cpu_load, QpCpuLoad, g);
      if (hwloc_bitmap_isequal(l->cpus, set)) {
        l->vcpus++;
        found = TRUE;
      }
    }
    if (!found) {
      QpCpuLoad l = {hwloc_bitmap_dup(set), 1};
      g_array_append_val(plan->cpu_load, l);
    }
  }
}
