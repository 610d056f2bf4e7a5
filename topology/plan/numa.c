/* Mode numa, and one-to-one with vNUMA: each guest node to one host node
 * (distinct nodes, least loaded first, a maximum matching when they
 * conflict), the caller's host-nodes kept; a guest node that fits nowhere
 * alone shares a host node with another. */
#include "topology/plan/numa.h"

#include <string.h>

#include "topology/plan/memory.h"
#include "topology/plan/one-to-one.h"
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
 * memory in whole GiB, lowest id. */
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
  guint64 gi = rank_mib(ctx, avail, i) / 1024;
  guint64 gj = rank_mib(ctx, avail, j) / 1024;
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

static void
gtasks_free(GuestTask *tasks, guint n)
{
  for (guint t = 0; t < n; t++) {
    hwloc_bitmap_free(tasks[t].vcpus);
    g_free(tasks[t].mem);
    if (tasks[t].fixed != NULL)
      g_array_unref(tasks[t].fixed);
  }
  g_free(tasks);
}

gboolean
plan_by_gnode(QpPlan *plan, const Ctx *ctx, Attempt *a, gboolean o2o,
              CapKind cap, GError **error)
{
  const QpRequest *req = ctx->req;
  const QpHost *host = ctx->host;
  guint nn = ctx->nn;
  guint nt = MAX(req->n_gnodes, 1);
  g_autofree guint64 *avail = avail_copy(ctx);
  g_autofree guint *capleft = g_new0(guint, MAX(nn, 1));
  g_autofree guint *load = g_memdup2(ctx->load, MAX(nn, 1) * sizeof(guint));
  g_auto(Acc) acc;
  acc_init(&acc, ctx);
  g_autofree int *owner = g_new(int, MAX(nn, 1));
  g_autofree gboolean *seen = g_new0(gboolean, MAX(nn, 1));
  g_autofree gboolean *used = g_new0(gboolean, MAX(nn, 1));
  g_autofree gboolean *vm_nodes = g_new0(gboolean, MAX(nn, 1));
  GuestTask *tasks = g_new0(GuestTask, nt);
  GArray **pref = g_new0(GArray *, nt);
  gboolean ok = FALSE;

  for (guint i = 0; i < nn; i++) {
    capleft[i] = node_cap(a, cap, i);
    owner[i] = -1;
  }

  for (guint t = 0; t < nt; t++) {
    GuestTask *gt = &tasks[t];
    gt->gi = req->n_gnodes > 0 ? (int)t : -1;
    gt->host = -1;
    gt->vcpus = hwloc_bitmap_alloc();
    for (guint v = 0; v < ctx->n; v++)
      if (req->n_gnodes == 0 || ctx->vcpu_gnode[v] == (int)t)
        hwloc_bitmap_set(gt->vcpus, v);
    gt->nv = (guint)hwloc_bitmap_weight(gt->vcpus);
    gt->units = task_units(ctx, cap, gt->vcpus);
    gt->mem = free_need(ctx, gt->gi);
    pref[t] = g_array_new(FALSE, FALSE, sizeof(guint));
  }

  /* 1. Memory the caller bound stays there, and guest nodes whose RAM the
   * caller bound are used as given. */
  if (!claim_all_fixed(ctx, &acc, avail, error))
    goto out;
  for (guint t = 0; t < nt; t++) {
    GuestTask *gt = &tasks[t];
    const Piece *ram = piece_at(ctx, t);
    if (!ram->caller_set)
      continue;
    g_autofree char *who = gnode_name(ctx, gt->gi);
    if (!node_indexes(ctx, ram->fixed, who, &gt->fixed, error))
      goto out;
    guint have = 0;
    g_auto(hwloc_bitmap_t) cpus = hwloc_bitmap_alloc();
    for (guint x = 0; x < gt->fixed->len; x++) {
      guint i = g_array_index(gt->fixed, guint, x);
      have += capleft[i];
      hwloc_bitmap_or(cpus, cpus, a->node_cpus[i]);
    }
    if (have < gt->units) {
      g_autofree char *list = qp_list_format(ram->fixed);
      g_autofree char *cl = qp_list_format(cpus);
      g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                  "%s has %u vCPUs but its host-nodes %s have only %u %s%s "
                  "(%s)",
                  who, gt->nv, list, have, cap_unit_name(cap), a->kind_note,
                  *cl ? cl : "no usable CPUs");
      goto out;
    }
    /* Take the units from the caller's nodes in order; all of its nodes
     * count as used for the distinct assignment of the others. */
    guint left = gt->units;
    for (guint x = 0; x < gt->fixed->len; x++) {
      guint i = g_array_index(gt->fixed, guint, x);
      guint take = MIN(left, capleft[i]);
      capleft[i] -= take;
      left -= take;
      used[i] = TRUE;
    }
  }

  /* 2. The others: distinct host nodes, least loaded first (a maximum
   * matching with preference order: without conflicts, plain greedy). */
  for (guint t = 0; t < nt; t++) {
    GuestTask *gt = &tasks[t];
    if (gt->fixed != NULL)
      continue;
    for (guint i = 0; i < nn; i++)
      if (ctx->node_ok[i] && !used[i] && (gt->nv == 0 || a->n_cpus[i] > 0) &&
          capleft[i] >= gt->units && fits(ctx, avail, i, gt->mem)) {
        guint pos = pref[t]->len;
        while (pos > 0 && node_before(ctx, a, avail, load, i,
                                      g_array_index(pref[t], guint, pos - 1)))
          pos--;
        g_array_insert_val(pref[t], pos, i);
      }
    /* Its best free node; only when none is left, move earlier guest
     * nodes to their next choices (an augmenting path). */
    gboolean placed = FALSE;
    for (guint x = 0; x < pref[t]->len && !placed; x++) {
      guint i = g_array_index(pref[t], guint, x);
      if (owner[i] < 0) {
        owner[i] = (int)t;
        placed = TRUE;
      }
    }
    if (!placed) {
      memset(seen, 0, MAX(nn, 1) * sizeof(gboolean));
      augment(t, pref, owner, seen);
    }
  }
  for (guint i = 0; i < nn; i++)
    if (owner[i] >= 0)
      tasks[owner[i]].host = (int)i;
  for (guint t = 0; t < nt; t++) {
    GuestTask *gt = &tasks[t];
    if (gt->host < 0)
      continue;
    guint i = (guint)gt->host;
    g_autofree char *who = gnode_name(ctx, gt->gi);
    g_autofree char *room = avail_phrase(ctx, avail, i);
    capleft[i] -= gt->units;
    load[i] += o2o ? 0 : gt->nv;
    add_reason(plan,
               "%s -> host node %d: %s (%u shared vCPUs on %u usable "
               "CPUs), %s",
               who, host->nodes[i].id,
               ctx->device_node[i] &&
                       ctx->opts->device_locality != QP_DEVLOC_IGNORE
                   ? "holds its vfio device"
                   : "least loaded",
               ctx->load[i], a->n_cpus[i], room);
    take_task_pieces(ctx, &acc, avail, gt->gi, i);
    used[i] = TRUE;
  }

  /* 3. Guest nodes left over share a host node with another guest node. */
  for (guint t = 0; t < nt; t++) {
    GuestTask *gt = &tasks[t];
    if (gt->fixed != NULL || gt->host >= 0)
      continue;
    int best = -1;
    for (guint i = 0; i < nn; i++)
      if (ctx->node_ok[i] && (gt->nv == 0 || a->n_cpus[i] > 0) &&
          capleft[i] >= gt->units && fits(ctx, avail, i, gt->mem) &&
          (best < 0 || node_before(ctx, a, avail, load, i, (guint)best)))
        best = (int)i;
    g_autofree char *who = gnode_name(ctx, gt->gi);
    if (best < 0) {
      /* Name the shortfall: the node with the most room for the CPUs. */
      int bc = -1, bm = -1;
      for (guint i = 0; i < nn; i++) {
        if (!ctx->node_ok[i] || a->n_cpus[i] == 0)
          continue;
        if (bc < 0 || capleft[i] > capleft[bc])
          bc = (int)i;
        if (capleft[i] >= gt->units &&
            (bm < 0 || rank_mib(ctx, avail, i) > rank_mib(ctx, avail, bm)))
          bm = (int)i;
      }
      g_autofree gboolean *cand = g_new0(gboolean, MAX(nn, 1));
      for (guint i = 0; i < nn; i++)
        cand[i] = ctx->node_ok[i];
      g_autofree char *scope = scope_phrase(ctx, a, cand);
      if (bc < 0) {
        g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                    "%s has %u vCPUs but no host node has %s%s", who, gt->nv,
                    cap_unit_name(cap), scope);
      } else if (bm < 0) {
        g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                    "%s needs %u %s%s but the best host node %d has only %u "
                    "left%s",
                    who, gt->units, cap_unit_name(cap),
                    cap == CAP_CPUS ? " (one host node per guest node)" : "",
                    host->nodes[bc].id, capleft[bc], scope);
      } else {
        guint c = short_class(ctx, avail, (guint)bm, gt->mem);
        g_autofree char *need = mem_phrase(ctx, c, gt->mem[c]);
        g_autofree char *detail = node_mem_detail(ctx, c, (guint)bm);
        g_set_error(
            error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
            "%s needs %s but the best node %d has only %" G_GUINT64_FORMAT
            " MiB uncommitted %s",
            who, need, host->nodes[bm].id,
            units_to_mib(ctx, c, avail[AT(ctx, c, bm)]), detail);
      }
      goto out;
    }
    guint i = (guint)best;
    gt->host = best;
    capleft[i] -= gt->units;
    load[i] += o2o ? 0 : gt->nv;
    take_task_pieces(ctx, &acc, avail, gt->gi, i);
    GString *others = g_string_new("");
    for (guint u = 0; u < nt; u++)
      if (u != t && tasks[u].host == best)
        g_string_append_printf(others, "%s%d", others->len ? "," : "",
                               req->n_gnodes ? req->gnodes[u].id : 0);
    for (guint u = 0; u < nt; u++)
      if (u != t && tasks[u].fixed != NULL)
        for (guint x = 0; x < tasks[u].fixed->len; x++)
          if (g_array_index(tasks[u].fixed, guint, x) == i)
            g_string_append_printf(others, "%s%d", others->len ? "," : "",
                                   req->gnodes[u].id);
    add_warning(plan,
                "%s shares host node %d with guest node %s: no assignment "
                "with distinct host nodes fits",
                who, host->nodes[i].id, others->str);
    add_reason(plan,
               "%s -> host node %d: shared, the least loaded node with "
               "room left",
               who, host->nodes[i].id);
    g_string_free(others, TRUE);
  }

  /* --device-locality=required: every device node must be used. */
  if (ctx->opts->device_locality == QP_DEVLOC_REQUIRED && ctx->any_device_node)
    for (guint i = 0; i < nn; i++) {
      if (!ctx->device_node[i])
        continue;
      gboolean hit = FALSE;
      for (guint t = 0; t < nt; t++) {
        if (tasks[t].host == (int)i)
          hit = TRUE;
        if (tasks[t].fixed != NULL)
          for (guint x = 0; x < tasks[t].fixed->len; x++)
            hit = hit || g_array_index(tasks[t].fixed, guint, x) == i;
      }
      if (!hit) {
        g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                    "--device-locality=required: no guest node fits on host "
                    "node %d, which holds a vfio device of the guest",
                    host->nodes[i].id);
        goto out;
      }
    }

  /* 4. vCPUs and memory. */
  for (guint t = 0; t < nt; t++) {
    GuestTask *gt = &tasks[t];
    g_autofree guint *one = NULL;
    const guint *nodes;
    guint k;
    if (gt->fixed != NULL) {
      nodes = (const guint *)(void *)gt->fixed->data;
      k = gt->fixed->len;
    } else {
      one = g_new(guint, 1);
      one[0] = (guint)gt->host;
      nodes = one;
      k = 1;
    }
    g_auto(hwloc_bitmap_t) cpus = hwloc_bitmap_alloc();
    for (guint x = 0; x < k; x++) {
      hwloc_bitmap_or(cpus, cpus, a->node_cpus[nodes[x]]);
      vm_nodes[nodes[x]] = TRUE;
    }
    if (gt->fixed != NULL) {
      g_autofree char *who = gnode_name(ctx, gt->gi);
      g_autofree char *list = qp_list_format(piece_at(ctx, t)->fixed);
      add_reason(plan, "%s -> host node%s %s: the caller's host-nodes", who,
                 k > 1 ? "s" : "", list);
      if (!o2o) {
        /* Shared load over the caller's nodes, remainder on the first. */
        for (guint x = 0; x < k; x++)
          acc.load[nodes[x]] += gt->nv / k + (x == 0 ? gt->nv % k : 0);
      }
    } else if (!o2o) {
      acc.load[nodes[0]] += gt->nv;
    }
    if (!o2o) {
      int v;
      hwloc_bitmap_foreach_begin(v, gt->vcpus)
      {
        plan->vcpu_cpus[v] = hwloc_bitmap_dup(cpus);
      }
      hwloc_bitmap_foreach_end();
    } else {
      for (guint x = 0; x < k; x++) {
        /* vCPUs of this guest node not yet placed go to the next node */
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
        pick_cores(plan, ctx, a, cap, nodes[x], rest);
        g_auto(hwloc_bitmap_t) here = hwloc_bitmap_dup(rest);
        hwloc_bitmap_foreach_begin(v, rest)
        {
          if (plan->vcpu_cpus[v] == NULL)
            hwloc_bitmap_clr(here, v);
        }
        hwloc_bitmap_foreach_end();
        g_autofree char *who = gnode_name(ctx, gt->gi);
        if (!hwloc_bitmap_iszero(here))
          reason_cores(plan, ctx, nodes[x], here, cap, who);
      }
    }
  }
  /* Memory: each piece on its own nodes, or on its guest node's. */
  for (guint x = 0; x < ctx->pieces->len; x++) {
    const Piece *p = piece_at(ctx, x);
    const GuestTask *gt = &tasks[MAX(p->gi, 0)];
    if (p->fixed != NULL || gt->host < 0) {
      add_plan_mem(plan, ctx, &acc, x, p->fixed);
    } else {
      guint i = (guint)gt->host;
      g_auto(hwloc_bitmap_t) ids = ids_of(ctx, &i, 1);
      add_plan_mem(plan, ctx, &acc, x, ids);
    }
  }
  ok = TRUE;
  finish_plan(plan, ctx, a, &acc, vm_nodes);

out:
  for (guint t = 0; t < nt; t++)
    g_array_unref(pref[t]);
  g_free(pref);
  gtasks_free(tasks, nt);
  return ok;
}
