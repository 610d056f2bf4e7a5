/* Node sets for balanced and for one-to-one without vNUMA: the fewest
 * candidate nodes holding the memory and the CPU units, grown from every
 * seed node (numad's centre + nearest), so that a plan costs O(n^3) in the
 * number of nodes at worst instead of enumerating subsets. */
#include "topology/plan/node-sets.h"

#include <string.h>

#include "topology/plan/memory.h"
#include "topology/plan/phrases.h"
#include "topology/plan/result.h"

static void
node_set_free(gpointer p)
{
  NodeSet *s = p;
  g_free(s->nodes);
  g_free(s);
}

/* TRUE when HAVE (units per class) holds the memory S needs. */
static gboolean
mem_held(const SetSearch *s, const guint64 *have)
{
  for (guint c = 0; c < s->ctx->ncls; c++)
    if (have[c] < s->mem_need[c])
      return FALSE;
  return TRUE;
}

/* TRUE when node J has memory of a class S still misses. */
static gboolean
mem_useful(const SetSearch *s, guint j, const guint64 *have)
{
  for (guint c = 0; c < s->ctx->ncls; c++)
    if (have[c] < s->mem_need[c] && s->avail[AT(s->ctx, c, j)] > 0)
      return TRUE;
  return FALSE;
}

/* What node J adds to the set: the share of the missing memory it holds
 * (averaged over the classes the guest needs) plus the share of the
 * missing CPU units. */
static double
contribution(const SetSearch *s, guint j, const guint64 *have, guint cap_have)
{
  double v = 0, mem = 0;
  guint classes = 0;
  for (guint c = 0; c < s->ctx->ncls; c++) {
    if (s->mem_need[c] == 0)
      continue;
    classes++;
    if (have[c] < s->mem_need[c])
      mem += (double)MIN(s->avail[AT(s->ctx, c, j)], s->mem_need[c] - have[c]) /
             (double)s->mem_need[c];
  }
  if (classes > 0)
    v += mem / classes;
  guint c = qp_plan_node_cap(s->a, s->cap, j);
  if (cap_have < s->cap_need)
    v += (double)MIN(c, s->cap_need - cap_have) / (double)s->cap_need;
  return v;
}

/* Grows a set from SEED until it holds the memory and the CPUs, adding the
 * node closest to the set (distance_first) or the one that contributes most
 * of what is still missing. Returns NULL when the usable nodes do not hold
 * the request. */
static NodeSet *
grow_from(const SetSearch *s, guint seed, gboolean distance_first, guint limit,
          gboolean *in_set, guint *maxd)
{
  const Ctx *ctx = s->ctx;
  guint nn = ctx->nn;
  guint k = 0;
  g_autofree guint *nodes = g_new(guint, nn);
  g_autofree guint64 *mem_have = g_new0(guint64, ctx->ncls);
  guint cap_have = 0;

  for (guint j = 0; j < nn; j++) {
    in_set[j] = FALSE;
    maxd[j] = qp_host_distance_at(ctx->host, seed, j);
  }
  guint add = seed;
  for (;;) {
    in_set[add] = TRUE;
    nodes[k++] = add;
    for (guint c = 0; c < ctx->ncls; c++)
      mem_have[c] += s->avail[AT(ctx, c, add)];
    cap_have += qp_plan_node_cap(s->a, s->cap, add);
    for (guint j = 0; j < nn; j++)
      maxd[j] = MAX(maxd[j], qp_host_distance_at(ctx->host, add, j));
    if (mem_held(s, mem_have) && cap_have >= s->cap_need)
      break;
    int best = -1;
    double best_c = 0;
    for (guint j = 0; j < nn; j++) {
      if (!s->cand[j] || in_set[j])
        continue;
      gboolean useful =
          mem_useful(s, j, mem_have) ||
          (cap_have < s->cap_need && qp_plan_node_cap(s->a, s->cap, j) > 0);
      if (!useful)
        continue;
      double c = contribution(s, j, mem_have, cap_have);
      if (best < 0) {
        best = (int)j;
        best_c = c;
        continue;
      }
      guint b = (guint)best;
      int cmp;
      if (distance_first) {
        cmp = maxd[j] != maxd[b] ? (maxd[j] < maxd[b] ? -1 : 1) : 0;
        if (cmp == 0 && qp_host_distance_at(ctx->host, seed, j) !=
                            qp_host_distance_at(ctx->host, seed, b))
          cmp = qp_host_distance_at(ctx->host, seed, j) <
                        qp_host_distance_at(ctx->host, seed, b)
                    ? -1
                    : 1;
        if (cmp == 0 && c != best_c)
          cmp = c > best_c ? -1 : 1;
      } else {
        cmp = c != best_c ? (c > best_c ? -1 : 1) : 0;
        if (cmp == 0 && maxd[j] != maxd[b])
          cmp = maxd[j] < maxd[b] ? -1 : 1;
      }
      if (cmp < 0) {
        best = (int)j;
        best_c = c;
      }
    }
    if (best < 0 || k >= limit) /* none left, or larger than a set found */
      return NULL;
    add = (guint)best;
  }
  NodeSet *set = g_new0(NodeSet, 1);
  set->k = k;
  set->nodes = g_new(guint, k);
  memcpy(set->nodes, nodes, k * sizeof(guint));
  for (guint x = 1; x < k; x++) /* insertion sort, k is small */
    for (guint y = x; y > 0 && set->nodes[y - 1] > set->nodes[y]; y--) {
      guint t = set->nodes[y];
      set->nodes[y] = set->nodes[y - 1];
      set->nodes[y - 1] = t;
    }
  return set;
}

SetScore
qp_plan_score_set(const SetSearch *s, const NodeSet *set)
{
  const Ctx *ctx = s->ctx;
  SetScore sc = {0};
  for (guint x = 0; x < set->k; x++) {
    guint i = set->nodes[x];
    if (ctx->device_node[i])
      sc.devices++;
    sc.mem += qp_plan_rank_mib(ctx, s->avail, i);
    sc.cap += qp_plan_node_cap(s->a, s->cap, i);
    sc.load += ctx->load[i];
    sc.cpus += s->a->n_cpus[i];
    for (guint y = x + 1; y < set->k; y++) {
      guint d = qp_host_distance_at(ctx->host, i, set->nodes[y]);
      sc.max_d = MAX(sc.max_d, d);
      sc.sum_d += d;
    }
  }
  return sc;
}

/* Negative when A ranks before B. */
static int
compare_sets(const SetSearch *s, const NodeSet *a, const NodeSet *b)
{
  SetScore x = qp_plan_score_set(s, a), y = qp_plan_score_set(s, b);
  if (s->ctx->opts->device_locality == QP_DEVLOC_PREFERRED &&
      x.devices != y.devices)
    return x.devices > y.devices ? -1 : 1;
  if (x.max_d != y.max_d)
    return x.max_d < y.max_d ? -1 : 1;
  if (x.sum_d != y.sum_d)
    return x.sum_d < y.sum_d ? -1 : 1;
  /* Memory compares in GiB, rounded to the nearest: smaller differences are the
   * noise of firmware and kernel reservations (seed 000's nodes: 15891-16124
   * MB). */
  x.mem = qp_plan_rank_round_gib(x.mem);
  y.mem = qp_plan_rank_round_gib(y.mem);
  /* Tightest fit: least memory left over, then fewest CPUs left over. So
   * does spread for a guest that spans nodes: its memory fills one node and
   * leaves a fragment on another (balanced.c), and the set that leaves the
   * least puts that fragment where it fits most tightly, the roomy nodes
   * whole for the next guest. */
  if (s->ctx->opts->strategy == QP_STRATEGY_PACK || a->k > 1) {
    if (x.mem != y.mem)
      return x.mem < y.mem ? -1 : 1;
    if (x.cap != y.cap)
      return x.cap < y.cap ? -1 : 1;
  } else {
    if (x.mem != y.mem)
      return x.mem > y.mem ? -1 : 1;
    /* least shared load per CPU: x.load/x.cpus < y.load/y.cpus */
    guint64 l = x.load * MAX(y.cpus, 1), r = y.load * MAX(x.cpus, 1);
    if (l != r)
      return l < r ? -1 : 1;
  }
  for (guint j = 0; j < a->k; j++)
    if (a->nodes[j] != b->nodes[j])
      return a->nodes[j] < b->nodes[j] ? -1 : 1;
  return 0;
}

static gboolean
same_set(const NodeSet *a, const NodeSet *b)
{
  return a->k == b->k && memcmp(a->nodes, b->nodes, a->k * sizeof(guint)) == 0;
}

static void
set_cap_error(const Ctx *ctx, CapKind cap, guint need, guint have,
              const char *scope, const char *prefix, GError **error)
{
  switch (cap) {
  case CAP_CPUS:
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                "%sguest needs %u CPU%s for %u vCPU%s but only %u %s usable%s",
                prefix, need, need == 1 ? "" : "s", need, need == 1 ? "" : "s",
                have, have == 1 ? "is" : "are", scope);
    break;
  case CAP_CORES:
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                "%sone-to-one needs %u free core%s but only %u %s free%s",
                prefix, need, need == 1 ? "" : "s", have,
                have == 1 ? "is" : "are", scope);
    break;
  case CAP_GROUPS:
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                "%sone-to-one with threads=%u needs %u free cores with %u "
                "usable SMT siblings but only %u are free%s",
                prefix, ctx->threads, need, ctx->threads, have, scope);
    break;
  case CAP_PUS:
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                "%sone-to-one needs %u CPU%s on free cores but only %u %s "
                "free%s",
                prefix, need, need == 1 ? "" : "s", have,
                have == 1 ? "is" : "are", scope);
    break;
  }
}

/* Why no set of candidates holds what S needs: the CPU units they lack,
 * or the class of memory. */
static void
set_no_set_error(const SetSearch *s, const char *prefix, GError **error)
{
  const Ctx *ctx = s->ctx;
  guint nn = ctx->nn;
  g_autofree guint64 *mems = g_new0(guint64, ctx->ncls);
  guint cap = 0, ncand = 0;
  for (guint i = 0; i < nn; i++)
    if (s->cand[i]) {
      for (guint c = 0; c < ctx->ncls; c++)
        mems[c] += s->avail[AT(ctx, c, i)];
      cap += qp_plan_node_cap(s->a, s->cap, i);
      ncand++;
    }
  guint cls = 0;
  while (cls + 1 < ctx->ncls && s->mem_need[cls] == 0)
    cls++;
  for (guint c = ctx->ncls; c-- > 0;)
    if (mems[c] < s->mem_need[c])
      cls = c;
  int bestmem = -1;
  for (guint i = 0; i < nn; i++)
    if (s->cand[i] && (bestmem < 0 || s->avail[AT(ctx, cls, i)] >
                                          s->avail[AT(ctx, cls, bestmem)]))
      bestmem = (int)i;
  g_autofree char *scope = qp_plan_scope_phrase(ctx, s->a, s->cand);
  if (cap < s->cap_need) {
    set_cap_error(ctx, s->cap, s->cap_need, cap, scope, prefix, error);
    return;
  }
  g_autofree char *need = qp_plan_mem_phrase(ctx, cls, s->mem_need[cls]);
  if (bestmem < 0) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                "%sguest needs %s but no host node may be used%s", prefix, need,
                scope);
    return;
  }
  if (ncand == 1) {
    g_autofree char *who = g_strdup_printf("%sguest", prefix);
    qp_plan_set_node_short_error(ctx, s->avail, (guint)bestmem, cls,
                                 s->mem_need[cls], who, error);
    return;
  }
  g_autofree char *detail = qp_plan_node_mem_detail(ctx, cls, (guint)bestmem);
  g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
              "%sguest needs %s but the usable host nodes have only "
              "%" G_GUINT64_FORMAT " MiB uncommitted together; the best node "
              "%d has %" G_GUINT64_FORMAT " MiB uncommitted %s",
              prefix, need, qp_plan_units_to_mib(ctx, cls, mems[cls]),
              ctx->host->nodes[bestmem].id,
              qp_plan_units_to_mib(ctx, cls, s->avail[AT(ctx, cls, bestmem)]),
              detail);
}

/* Chooses the fewest candidate nodes holding MEM_NEED units and CAP_NEED
 * CPU units; among those the closest, then by strategy. */
static NodeSet *
choose_node_set(const SetSearch *s, const char *prefix, GError **error)
{
  const Ctx *ctx = s->ctx;
  guint nn = ctx->nn;
  g_autoptr(GPtrArray) sets = g_ptr_array_new_with_free_func(node_set_free);
  g_autofree gboolean *in_set = g_new0(gboolean, MAX(nn, 1));
  g_autofree guint *maxd = g_new0(guint, MAX(nn, 1));
  g_autofree guint64 *none = g_new0(guint64, ctx->ncls);
  guint kmin = G_MAXUINT;

  for (guint seed = 0; seed < nn; seed++) {
    if (!s->cand[seed])
      continue;
    if (s->cap_need > 0 ? qp_plan_node_cap(s->a, s->cap, seed) == 0
                        : !mem_held(s, none) && !mem_useful(s, seed, none))
      continue;
    for (int df = 1; df >= 0; df--) {
      NodeSet *set = grow_from(s, seed, df, kmin, in_set, maxd);
      if (set == NULL)
        continue;
      gboolean dup = set->k > kmin;
      for (guint x = 0; !dup && x < sets->len; x++)
        dup = same_set(g_ptr_array_index(sets, x), set);
      if (dup) {
        node_set_free(set);
        continue;
      }
      kmin = MIN(kmin, set->k);
      g_ptr_array_add(sets, set);
    }
  }

  NodeSet *best = NULL;
  for (guint x = 0; x < sets->len; x++) {
    NodeSet *set = g_ptr_array_index(sets, x);
    if (set->k == kmin && (best == NULL || compare_sets(s, set, best) < 0))
      best = set;
  }
  if (best != NULL) {
    NodeSet *r = g_new0(NodeSet, 1);
    r->k = best->k;
    r->nodes = g_memdup2(best->nodes, best->k * sizeof(guint));
    return r;
  }

  set_no_set_error(s, prefix, error);
  return NULL;
}

/* choose_node_set() for a guest without vNUMA whose RAM the caller bound
 * (host-nodes on -machine memory-backend=, libvirt's <numatune> without
 * cells): its vCPUs go to the caller's nodes when they have room, else to
 * the set choose_node_set() finds. */
NodeSet *
qp_plan_choose_near_caller_mem(const SetSearch *s, const char *prefix,
                               GError **error)
{
  const Ctx *ctx = s->ctx;
  const Piece *ram = ctx->req->n_gnodes == 0 ? qp_plan_piece_at(ctx, 0) : NULL;
  if (ram != NULL && ram->caller_set) {
    g_autofree gboolean *near = g_new0(gboolean, MAX(ctx->nn, 1));
    for (guint i = 0; i < ctx->nn; i++)
      near[i] = s->cand[i] && hwloc_bitmap_isset(
                                  ram->fixed, (unsigned)ctx->host->nodes[i].id);
    SetSearch there = *s;
    there.cand = near;
    NodeSet *set = choose_node_set(&there, prefix, NULL);
    if (set != NULL)
      return set;
  }
  return choose_node_set(s, prefix, error);
}

gboolean
qp_plan_guest_set_choose(GuestSet *g, const Ctx *ctx, const Attempt *a,
                         Acc *acc, CapKind cap, guint cap_need, GError **error)
{
  memset(g, 0, sizeof(*g));
  g->avail = qp_plan_avail_copy(ctx);
  /* Memory the caller bound itself stays there. */
  if (!qp_plan_claim_all_fixed(ctx, acc, g->avail, error))
    return FALSE;
  g->need = qp_plan_free_need(ctx, -1);
  g_autofree char *prefix = NULL;
  g->cand = qp_plan_set_candidates(ctx, &prefix);
  g->s = (SetSearch){ctx, a, cap, g->avail, g->need, cap_need, g->cand};
  /* A CPU-less memory node (HBM, CXL, NVDIMM) joins a set only when the
   * nodes with CPUs cannot hold the memory, even in more nodes: its memory
   * is another kind, which the fewest nodes alone would take first. */
  NodeSet *set = NULL;
  g_autofree gboolean *with_cpus = g_new0(gboolean, MAX(ctx->nn, 1));
  gboolean any_cpuless = FALSE;
  for (guint i = 0; i < ctx->nn; i++) {
    const QpNode *n = &ctx->host->nodes[i];
    with_cpus[i] =
        g->cand[i] && n->cpus != NULL && !hwloc_bitmap_iszero(n->cpus);
    any_cpuless |= g->cand[i] && !with_cpus[i];
  }
  if (any_cpuless) {
    SetSearch cpu_nodes = g->s;
    cpu_nodes.cand = with_cpus;
    set = qp_plan_choose_near_caller_mem(&cpu_nodes, prefix, NULL);
  }
  if (set == NULL)
    set = qp_plan_choose_near_caller_mem(&g->s, prefix, error);
  if (set == NULL)
    return FALSE;
  g->nodes = set->nodes;
  g->k = set->k;
  g_free(set);
  g->ids = qp_plan_ids_of(ctx, g->nodes, g->k);
  return TRUE;
}

void
qp_plan_guest_set_clear(GuestSet *g)
{
  g_free(g->avail);
  g_free(g->need);
  g_free(g->cand);
  g_free(g->nodes);
  hwloc_bitmap_free(g->ids);
}
