/* Best effort: mode auto when the vCPUs do not fit the CPUs that balanced
 * or numa would give them.
 *
 * CPU overcommit is how most VM hosts run, and plain QEMU starts such a VM,
 * so auto never refuses one for CPUs. It widens the placement instead:
 *   - balanced shape (a guest without vNUMA): the fewest nodes holding the
 *     memory and as many usable CPUs as there are (every usable CPU when
 *     the vCPUs outnumber them); the vCPUs float there, memory is bound
 *     there, as balanced does;
 *   - numa shape: each guest node keeps its memory (its RAM and memory
 *     devices, each claimed in its page size) on one host node, on a node
 *     with usable CPUs where all of it qp_plan_fits (nodes with room for its
 * vCPUs first, then its vfio devices' nodes, nodes no other guest node uses,
 *     the least loaded per CPU, the most memory); its vCPUs float on that
 *     node's CPUs and, when they are short, on the nearest nodes' spare
 *     CPUs. When the VM has more vCPUs than usable CPUs, every guest
 *     node gets its share of the CPUs (vCPUs x usable / all vCPUs), so the
 *     overcommit is even;
 *   - on hybrid hosts the CPUs of every kind count;
 *   - when other VMs have dedicated every usable CPU, their cores are
 *     shared rather than the VM refused (the warning says so): with no
 *     other CPU to run on, sharing them is what plain QEMU would do too.
 * Memory is claimed piece by piece as the modes claim it (what the caller
 * bound stays on its host-nodes) and a VM whose memory does not fit is still
 * refused; so is one whose own options (--affinity, --hostnodes)
 * leave no CPU at all. What could not be given goes into plan->not_given
 * and into one warning line.
 *
 * Pure like the rest of the planner: no I/O, no clock, no globals. */
#include "topology/plan/best-effort.h"

#include <string.h>

#include "topology/plan/capacity.h"
#include "topology/plan/balanced.h"
#include "topology/plan/memory.h"
#include "topology/plan/phrases.h"
#include "topology/plan/result.h"

/* ---- Helpers ------------------------------------------------------------ */

static void G_GNUC_PRINTF(2, 3) not_given(QpPlan *plan, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_ptr_array_add(plan->not_given, g_strdup_vprintf(fmt, ap));
  va_end(ap);
}

static guint
cand_cpus(const Ctx *ctx, const Attempt *a, const gboolean *cand)
{
  guint total = 0;
  for (guint i = 0; i < ctx->nn; i++)
    if (cand[i])
      total += a->n_cpus[i];
  return total;
}

/* Shared vCPUs of other VMs on each node's CPUs of A (per CPU load, so a
 * VM confined to part of a node weighs on that part only). */
static double *
others_load(const Ctx *ctx, const Attempt *a)
{
  g_autofree double *per_cpu = qp_claims_cpu_load(ctx->host, ctx->claims);
  double *load = g_new0(double, MAX(ctx->nn, 1));
  for (guint i = 0; i < ctx->nn; i++) {
    int cpu;
    hwloc_bitmap_foreach_begin(cpu, a->node_cpus[i])
    {
      int ci = qp_plan_cpu_index(ctx, cpu);
      if (ci >= 0)
        load[i] += per_cpu[ci];
    }
    hwloc_bitmap_foreach_end();
  }
  return load;
}

/* "8 vCPUs share 2 usable CPUs (4.00 per CPU)" when the vCPUs outnumber the
 * CPUs they float on. */
static void
note_overcommit(QpPlan *plan, guint vcpus, guint cpus, const char *where)
{
  if (cpus == 0 || vcpus <= cpus)
    return;
  /* First: it is what a reader looks for. */
  g_ptr_array_insert(plan->not_given, 0,
                     g_strdup_printf("%u vCPUs share %u usable CPUs%s (%.2f "
                                     "per CPU)",
                                     vcpus, cpus, where, (double)vcpus / cpus));
}

/* ---- Balanced shape ----------------------------------------------------- */

static gboolean
widen_balanced(QpPlan *plan, const Ctx *ctx, Attempt *a, guint total,
               GError **error)
{
  if (!qp_plan_balanced(plan, ctx, a, MIN(ctx->n, total), error))
    return FALSE;
  g_autofree char *nodes = qp_list_format(plan->host_nodes);
  g_autofree char *where = g_strdup_printf(
      " on host node%s %s",
      hwloc_bitmap_weight(plan->host_nodes) > 1 ? "s" : "", nodes);
  note_overcommit(plan, ctx->n, (guint)hwloc_bitmap_weight(plan->process_cpus),
                  where);
  return TRUE;
}

/* ---- numa shape --------------------------------------------------------- */

typedef struct {
  const Ctx *ctx;
  const Attempt *a;
  const double *others; /* shared vCPUs of other VMs per node */
  double *mine;         /* this VM's vCPUs per node so far */
  guint64 *capleft;     /* CPU room left per node, in scaled units */
  guint *homes;         /* guest nodes whose memory is on the node */
  const guint64 *avail;
} Room;

static double
load_per_cpu(const Room *r, guint i)
{
  guint n = r->a->n_cpus[i];
  return n > 0 ? (r->others[i] + r->mine[i]) / n : 0.0;
}

/* TRUE when node I is a better home than J for a guest node with NV vCPUs
 * needing NEED scaled units of CPU room. */
static gboolean
home_before(const Room *r, guint nv, guint64 need, guint i, guint j)
{
  const Ctx *ctx = r->ctx;
  if (nv > 0) {
    gboolean ci = r->a->n_cpus[i] > 0, cj = r->a->n_cpus[j] > 0;
    if (ci != cj)
      return ci;
    gboolean fi = r->capleft[i] >= need, fj = r->capleft[j] >= need;
    if (fi != fj)
      return fi;
  }
  if (ctx->opts->device_locality != QP_DEVLOC_IGNORE &&
      ctx->device_node[i] != ctx->device_node[j])
    return ctx->device_node[i];
  if ((r->homes[i] == 0) != (r->homes[j] == 0))
    return r->homes[i] == 0;
  double li = load_per_cpu(r, i), lj = load_per_cpu(r, j);
  if (li != lj)
    return li < lj;
  guint64 gi = qp_plan_rank_gib(ctx, r->avail, i);
  guint64 gj = qp_plan_rank_gib(ctx, r->avail, j);
  if (gi != gj)
    return gi > gj;
  return i < j;
}

/* Distance of node I to the nearest of HOME (K node indexes). */
static guint
dist_to(const Ctx *ctx, const guint *home, guint k, guint i)
{
  guint d = G_MAXUINT;
  for (guint x = 0; x < k; x++)
    d = MIN(d, qp_host_distance_at(ctx->host, home[x], i));
  return d;
}

typedef struct {
  const Room *r;
  const guint *home;
  guint k;
} GrowOrder;

static gint
grow_cmp(gconstpointer pa, gconstpointer pb, gpointer data)
{
  const GrowOrder *o = data;
  guint i = *(const guint *)pa, j = *(const guint *)pb;
  gboolean hi = FALSE, hj = FALSE;
  for (guint x = 0; x < o->k; x++) {
    hi = hi || o->home[x] == i;
    hj = hj || o->home[x] == j;
  }
  if (hi != hj)
    return hi ? -1 : 1;
  guint di = dist_to(o->r->ctx, o->home, o->k, i);
  guint dj = dist_to(o->r->ctx, o->home, o->k, j);
  if (di != dj)
    return di < dj ? -1 : 1;
  double li = load_per_cpu(o->r, i), lj = load_per_cpu(o->r, j);
  if (li != lj)
    return li < lj ? -1 : 1;
  return i < j ? -1 : i > j;
}

/* The CPUs of a guest node's vCPUs: its home nodes' CPUs, then the nearest
 * nodes' spare room until NEED scaled units are found. Fills SPAN (node
 * indexes, in order) and SHARE (units taken per node index). */
static void
grow_cpus(Room *r, const gboolean *cand, const guint *home, guint k,
          guint64 need, GArray *span, guint64 *share)
{
  const Ctx *ctx = r->ctx;
  g_autoptr(GArray) order = g_array_new(FALSE, FALSE, sizeof(guint));
  for (guint i = 0; i < ctx->nn; i++) {
    gboolean is_home = FALSE;
    for (guint x = 0; x < k; x++)
      is_home = is_home || home[x] == i;
    if ((cand[i] || is_home) && r->a->n_cpus[i] > 0)
      g_array_append_val(order, i);
  }
  GrowOrder o = {r, home, k};
  g_array_sort_with_data(order, grow_cmp, &o);
  guint64 left = need;
  for (guint x = 0; x < order->len && left > 0; x++) {
    guint i = g_array_index(order, guint, x);
    guint64 take = MIN(left, r->capleft[i]);
    if (take == 0)
      continue;
    r->capleft[i] -= take;
    share[i] += take;
    left -= take;
    g_array_append_val(span, i);
  }
  /* The room adds up to the need of every guest node; should a rounding
   * leave this one without a node, it shares the first in order. */
  if (span->len == 0 && order->len > 0) {
    guint i = g_array_index(order, guint, 0);
    share[i] = need;
    g_array_append_val(span, i);
  }
}

/* One best-effort plan by guest node. */
typedef struct {
  QpPlan *plan;
  const Ctx *ctx;
  Attempt *a;
  guint total;     /* usable CPUs of the candidate nodes */
  gboolean scaled; /* CPU room in units of vCPUs x usable CPUs */
  Room r;
  guint64 *avail;
  double *others;
  double *mine;
  guint64 *capleft;
  guint *homes;
  guint64 *share;
  gboolean *vm_nodes;
  gboolean *cand;
  int *home_of; /* per task: the node index of its memory, -1: the caller's */
  Acc acc;
} Widen;

static void
widen_init(Widen *w, QpPlan *plan, const Ctx *ctx, Attempt *a, guint total)
{
  guint nn = MAX(ctx->nn, 1);
  *w = (Widen){.plan = plan, .ctx = ctx, .a = a, .total = total};
  w->avail = qp_plan_avail_copy(ctx);
  w->others = others_load(ctx, a);
  w->mine = g_new0(double, nn);
  w->capleft = g_new0(guint64, nn);
  w->homes = g_new0(guint, nn);
  w->share = g_new0(guint64, nn);
  w->vm_nodes = g_new0(gboolean, nn);
  w->cand = g_new0(gboolean, nn);
  w->home_of = g_new(int, MAX(ctx->req->n_gnodes, 1));
  qp_plan_acc_init(&w->acc, ctx);
  w->r = (Room){ctx, a, w->others, w->mine, w->capleft, w->homes, w->avail};
  /* CPU room in units that make the VM's vCPUs fit exactly when they
   * outnumber the usable CPUs: a node holds n_cpus x vCPUs, a guest node
   * needs its vCPUs x usable CPUs. */
  w->scaled = ctx->n > total;
  for (guint i = 0; i < ctx->nn; i++) {
    w->cand[i] = ctx->node_ok[i];
    w->capleft[i] = (guint64)a->n_cpus[i] * (w->scaled ? ctx->n : 1);
  }
}

static void
widen_clear(Widen *w)
{
  g_free(w->avail);
  g_free(w->others);
  g_free(w->mine);
  g_free(w->capleft);
  g_free(w->homes);
  g_free(w->share);
  g_free(w->vm_nodes);
  g_free(w->cand);
  g_free(w->home_of);
  qp_plan_acc_clear(&w->acc);
}

/* Why no candidate node holds the memory MEM of WHO. */
static void
set_no_home_error(const Widen *w, const char *who, const guint64 *mem,
                  GError **error)
{
  const Ctx *ctx = w->ctx;
  int bm = -1;
  for (guint i = 0; i < ctx->nn; i++)
    if (w->cand[i] &&
        (bm < 0 || qp_plan_rank_mib(ctx, w->avail, i) >
                       qp_plan_rank_mib(ctx, w->avail, (guint)bm)))
      bm = (int)i;
  if (bm < 0) {
    g_autofree char *scope = qp_plan_scope_phrase(ctx, w->a, w->cand);
    g_autofree char *m = qp_plan_need_phrase(ctx, mem);
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                "%s needs %s but no host node may be used%s", who, m, scope);
    return;
  }
  guint c = qp_plan_short_class(ctx, w->avail, (guint)bm, mem);
  qp_plan_set_node_short_error(ctx, w->avail, (guint)bm, c, mem[c], who, error);
}

/* The home of guest node GI's free pieces (RAM and memory devices): the
 * best candidate node where all of them fit, claimed there. */
static GArray *
choose_home(Widen *w, int gi, const char *who, guint nv, guint64 need,
            GError **error)
{
  const Ctx *ctx = w->ctx;
  g_autofree guint64 *mem = qp_plan_free_need(ctx, gi);
  int best = -1;
  for (guint i = 0; i < ctx->nn; i++)
    if (w->cand[i] && qp_plan_fits(ctx, w->avail, i, mem) &&
        (best < 0 || home_before(&w->r, nv, need, i, (guint)best)))
      best = (int)i;
  if (best < 0) {
    set_no_home_error(w, who, mem, error);
    return NULL;
  }
  guint i = (guint)best;
  GArray *home = g_array_new(FALSE, FALSE, sizeof(guint));
  g_array_append_val(home, i);
  qp_plan_take_task_pieces(ctx, &w->acc, w->avail, gi, i);
  return home;
}

/* The vCPUs VCPUS (NV of them, NEED scaled units) of WHO float on the CPUs
 * of its HOME nodes and, when they are short, of the nearest nodes. */
static void
float_vcpus(Widen *w, const char *who, hwloc_const_bitmap_t vcpus, guint nv,
            guint64 need, const GArray *home, gboolean fixed)
{
  const Ctx *ctx = w->ctx;
  const guint *hn = (const guint *)(void *)home->data;
  g_auto(hwloc_bitmap_t) hids = qp_plan_ids_of(ctx, hn, home->len);
  g_autoptr(GArray) span = g_array_new(FALSE, FALSE, sizeof(guint));
  memset(w->share, 0, MAX(ctx->nn, 1) * sizeof(guint64));
  grow_cpus(&w->r, w->cand, hn, home->len, need, span, w->share);
  g_auto(hwloc_bitmap_t) cpus = hwloc_bitmap_alloc();
  guint given = 0;
  for (guint x = 0; x < span->len; x++) {
    guint i = g_array_index(span, guint, x);
    hwloc_bitmap_or(cpus, cpus, w->a->node_cpus[i]);
    w->vm_nodes[i] = TRUE;
    guint l = need > 0 ? (guint)((guint64)nv * w->share[i] / need) : 0;
    w->acc.load[i] += l;
    w->mine[i] += l;
    given += l;
  }
  guint first = g_array_index(span, guint, 0);
  w->acc.load[first] += nv - given;
  w->mine[first] += nv - given;
  int v;
  hwloc_bitmap_foreach_begin(v, vcpus)
  {
    w->plan->vcpu_cpus[v] = hwloc_bitmap_dup(cpus);
  }
  hwloc_bitmap_foreach_end();

  g_auto(hwloc_bitmap_t) sids =
      qp_plan_ids_of(ctx, (const guint *)(void *)span->data, span->len);
  g_autofree char *vl = qp_plan_vcpu_list(ctx, vcpus);
  g_autofree char *cl = qp_list_format(cpus);
  g_autofree char *sl = qp_list_format(sids);
  g_autofree char *hl = qp_list_format(hids);
  qp_plan_add_reason(
      w->plan,
      "%s -> host node%s %s (memory%s); vCPUs %s float on CPUs %s "
      "of host node%s %s: best effort",
      who, home->len > 1 ? "s" : "", hl,
      fixed ? ", the caller's host-nodes" : "", vl, cl,
      span->len > 1 ? "s" : "", sl);
  if (span->len > 1)
    not_given(w->plan, "%s's vCPUs span host nodes %s", who, sl);
  if (!hwloc_bitmap_intersects(sids, hids))
    not_given(w->plan, "%s's memory is on host node%s %s, its vCPUs on %s", who,
              home->len > 1 ? "s" : "", hl, sl);
}

/* Places guest node T (the whole guest without vNUMA): its memory on its
 * home, its vCPUs around it. */
static gboolean
widen_gnode(Widen *w, guint t, GError **error)
{
  const Ctx *ctx = w->ctx;
  const QpRequest *req = ctx->req;
  /* The pieces start with the RAM of each guest node, in order. */
  const Piece *ram = qp_plan_piece_at(ctx, t);
  int gi = req->n_gnodes > 0 ? (int)t : -1;
  g_autofree char *who = qp_plan_gnode_name(ctx, gi);
  g_auto(hwloc_bitmap_t) vcpus = hwloc_bitmap_alloc();
  for (guint v = 0; v < ctx->n; v++)
    if (req->n_gnodes == 0 || ctx->vcpu_gnode[v] == (int)t)
      hwloc_bitmap_set(vcpus, v);
  guint nv = (guint)hwloc_bitmap_weight(vcpus);
  guint64 need = (guint64)nv * (w->scaled ? w->total : 1);

  g_autoptr(GArray) home = NULL;
  if (ram->caller_set) {
    if (!qp_plan_node_indexes(ctx, ram->fixed, who, &home, error))
      return FALSE;
    w->home_of[t] = -1;
  } else {
    home = choose_home(w, gi, who, nv, need, error);
    if (home == NULL)
      return FALSE;
    w->home_of[t] = (int)g_array_index(home, guint, 0);
  }
  for (guint x = 0; x < home->len; x++)
    w->homes[g_array_index(home, guint, x)]++;
  if (nv > 0)
    float_vcpus(w, who, vcpus, nv, need, home, ram->caller_set);
  return TRUE;
}

/* Guest nodes sharing a host node for their memory (one placed there by
 * the planner at least). */
static void
note_shared_homes(Widen *w, guint nt)
{
  const Ctx *ctx = w->ctx;
  const QpHost *host = ctx->host;
  for (guint i = 0; i < ctx->nn; i++) {
    if (w->homes[i] < 2)
      continue;
    g_auto(hwloc_bitmap_t) g = hwloc_bitmap_alloc();
    gboolean any_placed = FALSE;
    for (guint t = 0; t < nt; t++) {
      const Piece *ram = qp_plan_piece_at(ctx, t);
      gboolean here = w->home_of[t] == (int)i;
      if (ram->caller_set)
        here = hwloc_bitmap_isset(ram->fixed, host->nodes[i].id);
      else
        any_placed = any_placed || here;
      if (here)
        hwloc_bitmap_set(g, ctx->req->n_gnodes ? ctx->req->gnodes[t].id : 0);
    }
    g_autofree char *gl = qp_list_format(g);
    if (any_placed)
      not_given(w->plan, "guest nodes %s share host node %d", gl,
                host->nodes[i].id);
  }
}

/* --device-locality=required: every device node holds a guest node. */
static gboolean
check_device_homes(const Widen *w, GError **error)
{
  const Ctx *ctx = w->ctx;
  if (ctx->opts->device_locality != QP_DEVLOC_REQUIRED || !ctx->any_device_node)
    return TRUE;
  for (guint i = 0; i < ctx->nn; i++)
    if (ctx->device_node[i] && w->homes[i] == 0) {
      qp_plan_set_device_node_error(ctx, i, error);
      return FALSE;
    }
  return TRUE;
}

/* Memory the caller bound stays there (with the memory devices of a guest
 * node whose RAM it bound); guest nodes whose RAM the caller bound come
 * first, as numa does; then the others, each with its free pieces (RAM and
 * memory devices) on one host node. */
static gboolean
widen_gnodes(QpPlan *plan, const Ctx *ctx, Attempt *a, guint total,
             GError **error)
{
  guint nt = MAX(ctx->req->n_gnodes, 1);
  Widen w;
  widen_init(&w, plan, ctx, a, total);
  gboolean ok = qp_plan_claim_all_fixed(ctx, &w.acc, w.avail, error);
  for (int pass = 0; pass < 2 && ok; pass++)
    for (guint t = 0; t < nt && ok; t++)
      if (qp_plan_piece_at(ctx, t)->caller_set == (pass == 0))
        ok = widen_gnode(&w, t, error);
  if (ok) {
    /* Memory: each piece on its own nodes, or on its guest node's home. */
    qp_plan_add_mem_at_homes(plan, ctx, &w.acc, w.home_of);
    note_shared_homes(&w, nt);
    ok = check_device_homes(&w, error);
  }
  if (ok) {
    note_overcommit(plan, ctx->n, total, "");
    qp_plan_finish_plan(plan, ctx, a, &w.acc, w.vm_nodes);
  }
  widen_clear(&w);
  return ok;
}

/* ---- Entry -------------------------------------------------------------- */

/* Kinds of the CPUs in SET. */
static guint
kinds_in(const Ctx *ctx, hwloc_const_bitmap_t set)
{
  guint nk = MAX(ctx->host->n_kinds, 1);
  g_autofree gboolean *seen = g_new0(gboolean, nk);
  guint n = 0;
  int cpu;
  hwloc_bitmap_foreach_begin(cpu, set)
  {
    int ci = qp_plan_cpu_index(ctx, cpu);
    int k = ci >= 0 ? ctx->host->cpus[ci].kind : 0;
    if (k >= 0 && (guint)k < nk && !seen[k]) {
      seen[k] = TRUE;
      n++;
    }
  }
  hwloc_bitmap_foreach_end();
  return n;
}

/* What left no CPU, said after the scope phrase: nodes held whole by
 * unreadable records (the scope phrase names them and their remedy), the
 * caller's --affinity or --hostnodes, or the CPUs this process may run on
 * (the affinity and cpuset its caller gave it, less isolated CPUs) when
 * they hold none of the candidate nodes' CPUs. */
static char *
no_cpu_reason(const Ctx *ctx, const gboolean *cand)
{
  if (ctx->claims != NULL && ctx->claims->blocked_nodes != NULL &&
      !hwloc_bitmap_iszero(ctx->claims->blocked_nodes))
    return g_strdup("");
  if (ctx->opts->affinity != NULL || ctx->opts->hostnodes != NULL) {
    g_autofree char *l =
        ctx->host->allowed != NULL ? qp_list_format(ctx->host->allowed) : NULL;
    return g_strdup_printf(
        ": --affinity and --hostnodes must leave at least one usable CPU%s%s%s",
        l != NULL ? " (this process may run on CPUs " : "",
        l != NULL ? (*l != '\0' ? l : "none") : "", l != NULL ? ")" : "");
  }
  g_auto(hwloc_bitmap_t) cpus = hwloc_bitmap_alloc();
  for (guint i = 0; i < ctx->nn; i++)
    if (cand[i] && ctx->host->nodes[i].all_cpus != NULL)
      hwloc_bitmap_or(cpus, cpus, ctx->host->nodes[i].all_cpus);
  if (ctx->host->allowed == NULL || hwloc_bitmap_iszero(cpus) ||
      hwloc_bitmap_intersects(cpus, ctx->host->allowed))
    return g_strdup("");
  g_autofree char *l = qp_list_format(ctx->host->allowed);
  return g_strdup_printf(": this process may run only on CPUs %s (its CPU "
                         "affinity and cpuset, less the host's isolated CPUs)",
                         *l != '\0' ? l : "(none)");
}

gboolean
qp_plan_best_effort(QpPlan *plan, const Ctx *ctx, GError **error)
{
  gboolean balanced = plan->mode == QP_MODE_BALANCED;
  g_autofree char *prefix = NULL;
  g_autofree gboolean *cand = NULL;
  if (balanced) {
    cand = qp_plan_set_candidates(ctx, &prefix);
  } else {
    cand = g_memdup2(ctx->node_ok, MAX(ctx->nn, 1) * sizeof(gboolean));
    prefix = g_strdup("");
  }

  Attempt a;
  qp_plan_attempt_init(&a, ctx, ctx->usable);
  guint total = cand_cpus(ctx, &a, cand);
  gboolean on_dedicated = FALSE;
  if (total == 0) {
    /* Every usable CPU is another VM's dedicated core: share them. */
    g_auto(hwloc_bitmap_t) all = qp_plan_cpus_with_dedicated(ctx);
    qp_plan_attempt_clear(&a, ctx->nn);
    qp_plan_attempt_init(&a, ctx, all);
    total = cand_cpus(ctx, &a, cand);
    on_dedicated = total > 0;
  }
  if (total == 0) {
    g_autofree char *scope = qp_plan_scope_phrase(ctx, &a, cand);
    g_autofree char *why = no_cpu_reason(ctx, cand);
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT,
                "%sno CPU may run the guest's %u vCPU%s%s%s", prefix, ctx->n,
                ctx->n == 1 ? "" : "s", scope, why);
    qp_plan_attempt_clear(&a, ctx->nn);
    return FALSE;
  }

  gboolean ok = balanced ? widen_balanced(plan, ctx, &a, total, error)
                         : widen_gnodes(plan, ctx, &a, total, error);
  qp_plan_attempt_clear(&a, ctx->nn);
  if (!ok)
    return FALSE;

  g_auto(hwloc_bitmap_t) vm_cpus = hwloc_bitmap_alloc();
  for (guint v = 0; v < plan->n_vcpus; v++)
    if (plan->vcpu_cpus[v] != NULL)
      hwloc_bitmap_or(vm_cpus, vm_cpus, plan->vcpu_cpus[v]);
  if (on_dedicated) {
    g_autofree char *l = qp_list_format(vm_cpus);
    not_given(plan,
              "every usable CPU is dedicated to a one-to-one VM, so the "
              "vCPUs share those cores (%s)",
              l);
  }
  if (ctx->host->n_kinds > 1 && kinds_in(ctx, vm_cpus) > 1)
    not_given(plan, "the vCPUs straddle CPU kinds");
  if (plan->not_given->len == 0)
    return TRUE; /* nothing was missing after all */

  plan->best_effort = TRUE;
  g_autofree char **items = (char **)g_new0(char *, plan->not_given->len + 1);
  for (guint i = 0; i < plan->not_given->len; i++)
    items[i] = g_ptr_array_index(plan->not_given, i);
  g_autofree char *what = g_strjoinv("; ", items);
  qp_plan_add_warning(
      plan,
      "best effort (mode auto): %s; an explicit --mode=%s refuses "
      "this VM instead",
      what, qp_mode_name(plan->mode));
  qp_plan_add_reason(
      plan,
      "best effort: the vCPUs do not fit the CPUs %s would give, and "
      "mode auto never refuses a VM for CPUs",
      qp_mode_name(plan->mode));
  return TRUE;
}
