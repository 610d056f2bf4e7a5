/* Mode numa, and one-to-one with vNUMA: each guest node to one host node
 * (distinct nodes, least loaded first, a maximum matching when they
 * conflict), the caller's host-nodes kept; a guest node that fits nowhere
 * alone shares a host node with another. */
#include "topology/plan/numa.h"

#include <string.h>

#include "topology/plan/cache.h"
#include "topology/plan/cores.h"
#include "topology/plan/memory.h"
#include "topology/plan/phrases.h"
#include "topology/plan/result.h"

typedef struct {
  int gi;       /* index into req->gnodes, -1 for the whole guest */
  guint nv;     /* vCPUs */
  guint units;  /* CPU units needed (vCPUs, cores or sibling groups) */
  guint64 *mem; /* memory units needed per class, not counting the pieces
                   that must go to nodes of their own (Piece.fixed) */
  hwloc_bitmap_t vcpus;
  GArray *fixed; /* caller's node indexes, or NULL */
  int host;      /* chosen node index */
} GuestTask;

/* TRUE when node I ranks before node J for a new guest node: device nodes
 * first (--device-locality), least shared load per CPU, most uncommitted
 * memory in GiB (rounded to the nearest), lowest id. */
static gboolean
node_before(const Ctx *ctx, const Attempt *a, const guint64 *avail,
            const guint *load, guint i, guint j)
{
  if (ctx->opts->device_locality != QP_DEVLOC_IGNORE &&
      ctx->device_node[i] != ctx->device_node[j])
    return ctx->device_node[i];
  guint64 li = (guint64)load[i] * MAX(a->n_cpus[j], 1);
  guint64 lj = (guint64)load[j] * MAX(a->n_cpus[i], 1);
  if (li != lj)
    return li < lj;
  guint64 gi = qp_plan_rank_gib(ctx, avail, i);
  guint64 gj = qp_plan_rank_gib(ctx, avail, j);
  if (gi != gj)
    return gi > gj;
  return i < j;
}

/* Kuhn's augmenting path over guest nodes with preference lists. */
static gboolean
augment(guint t, GArray **pref, int *owner, gboolean *seen)
{
  for (guint x = 0; x < pref[t]->len; x++) {
    guint i = g_array_index(pref[t], guint, x);
    if (seen[i])
      continue;
    seen[i] = TRUE;
    if (owner[i] < 0 || augment((guint)owner[i], pref, owner, seen)) {
      owner[i] = (int)t;
      return TRUE;
    }
  }
  return FALSE;
}

/* One plan by guest node: the tasks (one per guest node, or one for the
 * whole guest), and the room left on each host node as they are placed. */
typedef struct {
  QpPlan *plan;
  const Ctx *ctx;
  Attempt *a;
  gboolean o2o;
  CapKind cap;
  guint nt;
  GuestTask *tasks;
  GArray **pref;      /* per task: candidate node indexes, best first */
  guint64 *avail;     /* memory units left per class and node, AT() */
  guint *capleft;     /* CPU units left per node index */
  guint *load;        /* shared vCPUs per node index, this VM's included */
  gboolean *used;     /* node indexes a guest node took */
  gboolean *vm_nodes; /* node indexes whose CPUs the VM uses */
  Acc acc;
} ByGnode;

static void
by_gnode_init(ByGnode *st, QpPlan *plan, const Ctx *ctx, Attempt *a,
              gboolean o2o, CapKind cap)
{
  const QpRequest *req = ctx->req;
  guint nn = MAX(ctx->nn, 1);
  *st = (ByGnode){.plan = plan,
                  .ctx = ctx,
                  .a = a,
                  .o2o = o2o,
                  .cap = cap,
                  .nt = MAX(req->n_gnodes, 1)};
  st->avail = qp_plan_avail_copy(ctx);
  st->capleft = g_new0(guint, nn);
  st->load = g_memdup2(ctx->load, nn * sizeof(guint));
  st->used = g_new0(gboolean, nn);
  st->vm_nodes = g_new0(gboolean, nn);
  qp_plan_acc_init(&st->acc, ctx);
  for (guint i = 0; i < ctx->nn; i++)
    st->capleft[i] = qp_plan_node_cap(a, cap, i);
  st->tasks = g_new0(GuestTask, st->nt);
  st->pref = g_new0(GArray *, st->nt);
  for (guint t = 0; t < st->nt; t++) {
    GuestTask *gt = &st->tasks[t];
    gt->gi = req->n_gnodes > 0 ? (int)t : -1;
    gt->host = -1;
    gt->vcpus = hwloc_bitmap_alloc();
    for (guint v = 0; v < ctx->n; v++)
      if (req->n_gnodes == 0 || ctx->vcpu_gnode[v] == (int)t)
        hwloc_bitmap_set(gt->vcpus, v);
    gt->nv = (guint)hwloc_bitmap_weight(gt->vcpus);
    gt->units = qp_plan_task_units(ctx, cap, gt->vcpus);
    gt->mem = qp_plan_free_need(ctx, gt->gi);
    st->pref[t] = g_array_new(FALSE, FALSE, sizeof(guint));
  }
}

static void
by_gnode_clear(ByGnode *st)
{
  for (guint t = 0; t < st->nt; t++) {
    GuestTask *gt = &st->tasks[t];
    hwloc_bitmap_free(gt->vcpus);
    g_free(gt->mem);
    if (gt->fixed != NULL)
      g_array_unref(gt->fixed);
    g_array_unref(st->pref[t]);
  }
  g_free(st->tasks);
  g_free(st->pref);
  g_free(st->avail);
  g_free(st->capleft);
  g_free(st->load);
  g_free(st->used);
  g_free(st->vm_nodes);
  qp_plan_acc_clear(&st->acc);
}

/* Guest node T takes its node index I: its CPU units, its shared load. */
static void
take_node(ByGnode *st, GuestTask *gt, guint i)
{
  st->capleft[i] -= gt->units;
  st->load[i] += st->o2o ? 0 : gt->nv;
}

/* 1. Guest nodes whose RAM the caller bound are used as given: their CPU
 * units come from the caller's nodes in order, and all of those nodes
 * count as used for the distinct assignment of the others. */
static gboolean
place_caller_bound(ByGnode *st, GError **error)
{
  const Ctx *ctx = st->ctx;
  for (guint t = 0; t < st->nt; t++) {
    GuestTask *gt = &st->tasks[t];
    const Piece *ram = qp_plan_piece_at(ctx, t);
    if (!ram->caller_set)
      continue;
    g_autofree char *who = qp_plan_gnode_name(ctx, gt->gi);
    if (!qp_plan_node_indexes(ctx, ram->fixed, who, &gt->fixed, error))
      return FALSE;
    guint have = 0;
    g_auto(hwloc_bitmap_t) cpus = hwloc_bitmap_alloc();
    for (guint x = 0; x < gt->fixed->len; x++) {
      guint i = g_array_index(gt->fixed, guint, x);
      have += st->capleft[i];
      hwloc_bitmap_or(cpus, cpus, st->a->node_cpus[i]);
    }
    if (have < gt->units) {
      g_autofree char *list = qp_list_format(ram->fixed);
      g_autofree char *cl = qp_list_format(cpus);
      g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                  "%s has %u vCPU%s but its host-nodes %s have only %u %s%s "
                  "(%s)",
                  who, gt->nv, gt->nv == 1 ? "" : "s", list, have,
                  qp_plan_cap_unit_name(st->cap, have), st->a->kind_note,
                  *cl ? cl : "no usable CPUs");
      return FALSE;
    }
    guint left = gt->units;
    for (guint x = 0; x < gt->fixed->len; x++) {
      guint i = g_array_index(gt->fixed, guint, x);
      guint take = MIN(left, st->capleft[i]);
      st->capleft[i] -= take;
      left -= take;
      st->used[i] = TRUE;
    }
  }
  return TRUE;
}

/* TRUE when node index I has room for GT (USED: and no guest node yet). */
static gboolean
has_room(const ByGnode *st, const GuestTask *gt, guint i, gboolean distinct)
{
  const Ctx *ctx = st->ctx;
  return ctx->node_ok[i] && !(distinct && st->used[i]) &&
         (gt->nv == 0 || st->a->n_cpus[i] > 0) && st->capleft[i] >= gt->units &&
         qp_plan_fits(ctx, st->avail, i, gt->mem);
}

/* The candidates of task T, best first. */
static void
fill_pref(ByGnode *st, guint t)
{
  GArray *pref = st->pref[t];
  for (guint i = 0; i < st->ctx->nn; i++)
    if (has_room(st, &st->tasks[t], i, TRUE)) {
      guint pos = pref->len;
      while (pos > 0 && node_before(st->ctx, st->a, st->avail, st->load, i,
                                    g_array_index(pref, guint, pos - 1)))
        pos--;
      g_array_insert_val(pref, pos, i);
    }
}

/* 2. The other guest nodes on distinct host nodes, least loaded first: a
 * maximum matching with preference order (without conflicts, plain
 * greedy). Each takes its best free node; only when none is left are
 * earlier guest nodes moved to their next choices (an augmenting path). */
static void
match_distinct(ByGnode *st)
{
  const Ctx *ctx = st->ctx;
  guint nn = MAX(ctx->nn, 1);
  g_autofree int *owner = g_new(int, nn);
  g_autofree gboolean *seen = g_new0(gboolean, nn);
  for (guint i = 0; i < ctx->nn; i++)
    owner[i] = -1;
  for (guint t = 0; t < st->nt; t++) {
    if (st->tasks[t].fixed != NULL)
      continue;
    fill_pref(st, t);
    gboolean placed = FALSE;
    for (guint x = 0; x < st->pref[t]->len && !placed; x++) {
      guint i = g_array_index(st->pref[t], guint, x);
      if (owner[i] < 0) {
        owner[i] = (int)t;
        placed = TRUE;
      }
    }
    if (!placed) {
      memset(seen, 0, nn * sizeof(gboolean));
      augment(t, st->pref, owner, seen);
    }
  }
  for (guint i = 0; i < ctx->nn; i++)
    if (owner[i] >= 0)
      st->tasks[owner[i]].host = (int)i;
}

/* Claims what the matched guest nodes take, with a reason each. */
static void
take_matched(ByGnode *st)
{
  const Ctx *ctx = st->ctx;
  for (guint t = 0; t < st->nt; t++) {
    GuestTask *gt = &st->tasks[t];
    if (gt->host < 0)
      continue;
    guint i = (guint)gt->host;
    g_autofree char *who = qp_plan_gnode_name(ctx, gt->gi);
    g_autofree char *room = qp_plan_avail_phrase(ctx, st->avail, i);
    take_node(st, gt, i);
    qp_plan_add_reason(st->plan,
                       "%s -> host node %d: %s (%u shared vCPUs on %u usable "
                       "CPUs), %s",
                       who, ctx->host->nodes[i].id,
                       ctx->device_node[i] &&
                               ctx->opts->device_locality != QP_DEVLOC_IGNORE
                           ? "holds its vfio device"
                           : "least loaded",
                       ctx->load[i], st->a->n_cpus[i], room);
    qp_plan_take_task_pieces(ctx, &st->acc, st->avail, gt->gi, i);
    st->used[i] = TRUE;
  }
}

/* Why GT fits on no host node: the node with the most room for its CPUs
 * or, among those with room for them, the most memory. */
static void
set_no_room_error(const ByGnode *st, const GuestTask *gt, GError **error)
{
  const Ctx *ctx = st->ctx;
  guint nn = ctx->nn;
  int bc = -1, bm = -1;
  for (guint i = 0; i < nn; i++) {
    if (!ctx->node_ok[i] || st->a->n_cpus[i] == 0)
      continue;
    if (bc < 0 || st->capleft[i] > st->capleft[bc])
      bc = (int)i;
    if (st->capleft[i] >= gt->units &&
        (bm < 0 || qp_plan_rank_mib(ctx, st->avail, i) >
                       qp_plan_rank_mib(ctx, st->avail, bm)))
      bm = (int)i;
  }
  g_autofree char *who = qp_plan_gnode_name(ctx, gt->gi);
  g_autofree gboolean *cand =
      g_memdup2(ctx->node_ok, MAX(nn, 1) * sizeof(gboolean));
  g_autofree char *scope = qp_plan_scope_phrase(ctx, st->a, cand);
  const char *unit = qp_plan_cap_unit_name(st->cap, gt->units);
  if (bc < 0) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                "%s has %u vCPU%s but no host node has %s%s", who, gt->nv,
                gt->nv == 1 ? "" : "s", qp_plan_cap_unit_name(st->cap, 2),
                scope);
  } else if (bm < 0) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                "%s needs %u %s%s but the best host node %d has only %u "
                "left%s",
                who, gt->units, unit,
                st->cap == CAP_CPUS ? " (one host node per guest node)" : "",
                ctx->host->nodes[bc].id, st->capleft[bc], scope);
  } else {
    guint c = qp_plan_short_class(ctx, st->avail, (guint)bm, gt->mem);
    qp_plan_set_node_short_error(ctx, st->avail, (guint)bm, c, gt->mem[c], who,
                                 error);
  }
}

/* Host nodes with CPUs the VM may use as the host and its caller made
 * them (--hostnodes, --affinity, the cgroup), whatever other VMs hold or
 * the ledger blocks for now. */
static guint
shape_nodes(const Ctx *ctx)
{
  const QpPlacementOptions *opts = ctx->opts;
  guint n = 0;
  for (guint i = 0; i < ctx->nn; i++) {
    const QpNode *node = &ctx->host->nodes[i];
    if (node->cpus == NULL ||
        (opts->hostnodes != NULL &&
         !hwloc_bitmap_isset(opts->hostnodes, node->id)) ||
        (ctx->host->allowed_nodes != NULL &&
         !hwloc_bitmap_isset(ctx->host->allowed_nodes, node->id)))
      continue;
    g_auto(hwloc_bitmap_t) cpus = hwloc_bitmap_dup(node->cpus);
    if (ctx->host->allowed != NULL)
      hwloc_bitmap_and(cpus, cpus, ctx->host->allowed);
    if (opts->affinity != NULL)
      hwloc_bitmap_and(cpus, cpus, opts->affinity);
    n += !hwloc_bitmap_iszero(cpus);
  }
  return n;
}

/* Task T shares node index I with other guest nodes: the warning names
 * them, unless the host has too few nodes for distinct ones. */
static void
warn_shared(ByGnode *st, guint t, guint i)
{
  const QpRequest *req = st->ctx->req;
  g_autoptr(GString) others = g_string_new("");
  for (guint u = 0; u < st->nt; u++)
    if (u != t && st->tasks[u].host == (int)i)
      g_string_append_printf(others, "%s%d", others->len ? "," : "",
                             req->n_gnodes ? req->gnodes[u].id : 0);
  for (guint u = 0; u < st->nt; u++)
    if (u != t && st->tasks[u].fixed != NULL)
      for (guint x = 0; x < st->tasks[u].fixed->len; x++)
        if (g_array_index(st->tasks[u].fixed, guint, x) == i)
          g_string_append_printf(others, "%s%d", others->len ? "," : "",
                                 req->gnodes[u].id);
  g_autofree char *who = qp_plan_gnode_name(st->ctx, st->tasks[t].gi);
  int id = st->ctx->host->nodes[i].id;
  /* Fewer host nodes than guest nodes where the VM may run: sharing is the
   * host's shape (a one-node host), as with QEMU alone, not a placement
   * worse than the mode promises; the plan says it, the log does not. */
  guint usable = shape_nodes(st->ctx);
  if (usable < st->nt) {
    qp_plan_add_reason(st->plan,
                       "%s -> host node %d: shared with guest node %s, the "
                       "least loaded node with room left: %u host node%s with "
                       "CPUs for %u guest nodes",
                       who, id, others->str, usable, usable == 1 ? "" : "s",
                       st->nt);
    return;
  }
  qp_plan_add_warning(
      st->plan,
      "%s shares host node %d with guest node %s: no assignment "
      "with distinct host nodes fits",
      who, id, others->str);
  qp_plan_add_reason(st->plan,
                     "%s -> host node %d: shared, the least loaded node with "
                     "room left",
                     who, id);
}

/* 3. Guest nodes left over share a host node with another guest node. */
static gboolean
place_shared(ByGnode *st, GError **error)
{
  const Ctx *ctx = st->ctx;
  for (guint t = 0; t < st->nt; t++) {
    GuestTask *gt = &st->tasks[t];
    if (gt->fixed != NULL || gt->host >= 0)
      continue;
    int best = -1;
    for (guint i = 0; i < ctx->nn; i++)
      if (has_room(st, gt, i, FALSE) &&
          (best < 0 ||
           node_before(ctx, st->a, st->avail, st->load, i, (guint)best)))
        best = (int)i;
    if (best < 0) {
      set_no_room_error(st, gt, error);
      return FALSE;
    }
    guint i = (guint)best;
    gt->host = best;
    take_node(st, gt, i);
    qp_plan_take_task_pieces(ctx, &st->acc, st->avail, gt->gi, i);
    warn_shared(st, t, i);
  }
  return TRUE;
}

/* --device-locality=required: every device node must be used. */
static gboolean
check_device_nodes(const ByGnode *st, GError **error)
{
  const Ctx *ctx = st->ctx;
  if (ctx->opts->device_locality != QP_DEVLOC_REQUIRED || !ctx->any_device_node)
    return TRUE;
  for (guint i = 0; i < ctx->nn; i++) {
    if (!ctx->device_node[i])
      continue;
    gboolean hit = FALSE;
    for (guint t = 0; t < st->nt; t++) {
      const GuestTask *gt = &st->tasks[t];
      if (gt->host == (int)i)
        hit = TRUE;
      for (guint x = 0; gt->fixed != NULL && x < gt->fixed->len; x++)
        hit = hit || g_array_index(gt->fixed, guint, x) == i;
    }
    if (!hit) {
      qp_plan_set_device_node_error(ctx, i, error);
      return FALSE;
    }
  }
  return TRUE;
}

/* One-to-one: GT's vCPUs take cores on its NODES (K) in order, those not
 * placed on one node going to the next. */
static void
pick_task_cores(ByGnode *st, const GuestTask *gt, const guint *nodes, guint k)
{
  QpPlan *plan = st->plan;
  for (guint x = 0; x < k; x++) {
    g_auto(hwloc_bitmap_t) rest = hwloc_bitmap_alloc();
    int v;
    hwloc_bitmap_foreach_begin(v, gt->vcpus)
    {
      if (plan->vcpu_cpus[v] == NULL)
        hwloc_bitmap_set(rest, v);
    }
    hwloc_bitmap_foreach_end();
    if (hwloc_bitmap_iszero(rest))
      break;
    qp_plan_pick_cores(plan, st->ctx, st->a, st->cap, nodes[x], rest);
    g_auto(hwloc_bitmap_t) here = hwloc_bitmap_dup(rest);
    hwloc_bitmap_foreach_begin(v, rest)
    {
      if (plan->vcpu_cpus[v] == NULL)
        hwloc_bitmap_clr(here, v);
    }
    hwloc_bitmap_foreach_end();
    g_autofree char *who = qp_plan_gnode_name(st->ctx, gt->gi);
    if (!hwloc_bitmap_iszero(here))
      qp_plan_reason_cores(plan, st->ctx, nodes[x], here, st->cap, who);
  }
}

/* 4. The vCPUs of task T on its host node, or on the caller's nodes. */
static void
place_task_vcpus(ByGnode *st, guint t)
{
  const Ctx *ctx = st->ctx;
  const GuestTask *gt = &st->tasks[t];
  guint one = (guint)MAX(gt->host, 0);
  const guint *nodes =
      gt->fixed != NULL ? (const guint *)(void *)gt->fixed->data : &one;
  guint k = gt->fixed != NULL ? gt->fixed->len : 1;
  g_auto(hwloc_bitmap_t) cpus = hwloc_bitmap_alloc();
  for (guint x = 0; x < k; x++) {
    hwloc_bitmap_or(cpus, cpus, st->a->node_cpus[nodes[x]]);
    st->vm_nodes[nodes[x]] = TRUE;
  }
  if (gt->fixed != NULL) {
    g_autofree char *who = qp_plan_gnode_name(ctx, gt->gi);
    g_autofree char *list = qp_list_format(qp_plan_piece_at(ctx, t)->fixed);
    qp_plan_add_reason(st->plan,
                       "%s -> host node%s %s: the caller's host-nodes", who,
                       k > 1 ? "s" : "", list);
  }
  if (st->o2o) {
    pick_task_cores(st, gt, nodes, k);
    return;
  }
  /* Shared load over the nodes, remainder on the first. */
  for (guint x = 0; x < k; x++)
    st->acc.load[nodes[x]] += gt->nv / k + (x == 0 ? gt->nv % k : 0);
  /* On one node, a guest node that fits a cache domain floats inside one. */
  g_autofree char *who = qp_plan_gnode_name(ctx, gt->gi);
  g_auto(hwloc_bitmap_t) domain =
      k == 1 ? qp_plan_cache_float_cpus(st->plan, ctx, st->a, nodes[0], gt->nv,
                                        who)
             : NULL;
  int v;
  hwloc_bitmap_foreach_begin(v, gt->vcpus)
  {
    st->plan->vcpu_cpus[v] = hwloc_bitmap_dup(domain != NULL ? domain : cpus);
  }
  hwloc_bitmap_foreach_end();
}

gboolean
qp_plan_by_gnode(QpPlan *plan, const Ctx *ctx, Attempt *a, gboolean o2o,
                 CapKind cap, GError **error)
{
  ByGnode st;
  by_gnode_init(&st, plan, ctx, a, o2o, cap);
  /* Memory the caller bound stays there. */
  gboolean ok = qp_plan_claim_all_fixed(ctx, &st.acc, st.avail, error) &&
                place_caller_bound(&st, error);
  if (ok) {
    match_distinct(&st);
    take_matched(&st);
    ok = place_shared(&st, error) && check_device_nodes(&st, error);
  }
  if (ok) {
    for (guint t = 0; t < st.nt; t++)
      place_task_vcpus(&st, t);
    /* Memory: each piece on its own nodes, or on its guest node's. */
    g_autofree int *home = g_new(int, st.nt);
    for (guint t = 0; t < st.nt; t++)
      home[t] = st.tasks[t].host;
    qp_plan_add_mem_at_homes(plan, ctx, &st.acc, home);
    qp_plan_finish_plan(plan, ctx, a, &st.acc, st.vm_nodes);
  }
  by_gnode_clear(&st);
  return ok;
}
