/* The rebalance planner (rebalance.h): a working copy of the live claims,
 * moves applied to it one after the other, each checked against the room
 * left then; the request's plan from qp_plan_compute() on the result.
 * Goal (b) tries each candidate set with the greedy (clear_set), then with
 * the bounded search (search_set) on a light copy of the working state
 * (memory per VM and node, room per node), whose plan is replayed on the
 * working copy through the same checks as the greedy's moves. */
#include "topology/plan/rebalance.h"

#include <string.h>

#include "topology/plan/capacity.h"
#include "topology/plan/claim.h"

#define REQ_ID "(request)"

/* ---- Claims -------------------------------------------------------------- */

static QpClaims *
claims_copy(const QpClaims *src)
{
  QpClaims *w = qp_claims_new();
  for (guint i = 0; i < src->claims->len; i++)
    g_ptr_array_add(w->claims, qp_claim_copy(src->claims->pdata[i]));
  hwloc_bitmap_copy(w->blocked_nodes, src->blocked_nodes);
  return w;
}

gboolean
qp_claim_has_vfio(const QpClaim *c)
{
  for (guint i = 0; c->devices != NULL && i < c->devices->len; i++)
    if (g_str_has_prefix(c->devices->pdata[i], "vfio-pci"))
      return TRUE;
  return FALSE;
}

static guint64
mem_on(const QpClaim *c, int node)
{
  guint64 m = 0;
  for (guint x = 0; x < c->mem->len; x++)
    if (g_array_index(c->mem, QpNodeAmount, x).node == node)
      m += g_array_index(c->mem, QpNodeAmount, x).mib;
  return m;
}

static guint64
mem_total(const QpClaim *c)
{
  guint64 m = 0;
  for (guint x = 0; x < c->mem->len; x++)
    m += g_array_index(c->mem, QpNodeAmount, x).mib;
  return m;
}

static guint
load_on(const QpClaim *c, int node)
{
  guint n = 0;
  for (guint x = 0; x < c->load->len; x++)
    if (g_array_index(c->load, QpNodeLoad, x).node == node)
      n += g_array_index(c->load, QpNodeLoad, x).vcpus;
  return n;
}

static guint
load_total(const QpClaim *c)
{
  guint n = 0;
  for (guint x = 0; x < c->load->len; x++)
    n += g_array_index(c->load, QpNodeLoad, x).vcpus;
  return n;
}

/* MiB of C's hugepages that are not on node ID (ON: that are on it). */
static guint64
huge_mib_where(const QpClaim *c, int id, gboolean on)
{
  guint64 kib = 0;
  for (guint x = 0; x < c->huge->len; x++) {
    const QpHugeClaim *h = &g_array_index(c->huge, QpHugeClaim, x);
    if ((h->node == id) == on)
      kib += h->pages * h->page_kib;
  }
  return kib / 1024;
}

static guint64
huge_mib_off(const QpClaim *c, int id)
{
  return huge_mib_where(c, id, FALSE);
}

/* Host nodes (ids) where C holds memory, hugepages, shared vCPUs or
 * dedicated CPUs. */
static hwloc_bitmap_t
nodes_of(const QpHost *host, const QpClaim *c)
{
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  for (guint x = 0; x < c->mem->len; x++)
    if (g_array_index(c->mem, QpNodeAmount, x).mib > 0)
      hwloc_bitmap_set(set,
                       (unsigned)g_array_index(c->mem, QpNodeAmount, x).node);
  for (guint x = 0; x < c->huge->len; x++)
    if (g_array_index(c->huge, QpHugeClaim, x).pages > 0)
      hwloc_bitmap_set(set,
                       (unsigned)g_array_index(c->huge, QpHugeClaim, x).node);
  for (guint x = 0; x < c->load->len; x++)
    if (g_array_index(c->load, QpNodeLoad, x).vcpus > 0)
      hwloc_bitmap_set(set,
                       (unsigned)g_array_index(c->load, QpNodeLoad, x).node);
  for (guint i = 0; i < host->n_nodes; i++)
    if (host->nodes[i].all_cpus != NULL &&
        hwloc_bitmap_intersects(c->dedicated, host->nodes[i].all_cpus))
      hwloc_bitmap_set(set, (unsigned)host->nodes[i].id);
  return set;
}

/* Cores of HOST that hold a CPU of SET. */
static guint
cores_in(const QpHost *host, hwloc_const_bitmap_t set)
{
  guint n = 0;
  for (guint k = 0; k < host->n_cores; k++)
    if (hwloc_bitmap_intersects(host->cores[k].pus, set))
      n++;
  return n;
}

/* ---- The working state --------------------------------------------------- */

typedef struct {
  guint ci; /* index into w->claims */
  const QpRebalanceVm *in;
  gboolean movable;
  gboolean moved;
} Vm;

/* The union of every claim's dedicated CPUs of a Work's claims, and
 * whether no CPU is in two of them; VALID until a claim's dedicated CPUs or
 * the claims change (dedicated_changed()). dedicated_others() is asked for
 * each VM and node a rebalance tries, and going over every claim each time
 * made it grow with the square of the records (robustness.md, finding
 * 46). */
typedef struct {
  gboolean valid;
  gboolean disjoint;
  hwloc_bitmap_t all;
} DedCache;

typedef struct {
  const QpHost *host; /* own_host */
  /* The host as the moves so far leave it: a shallow copy whose nodes are
   * its own, each node's can_give_mib and used_mib given back the pages a
   * VM moved away from it (the kernel frees them as they leave). */
  QpHost *own_host;
  const QpPlacementOptions *popts;
  QpClaims *w;
  GArray *vms;      /* of Vm */
  GPtrArray *moves; /* of QpMove* */
  DedCache *ded;    /* made with w (work_init(), work_copy()) */
} Work;

static void
move_free(gpointer p)
{
  QpMove *m = p;
  if (m == NULL)
    return;
  g_free(m->vm);
  hwloc_bitmap_free(m->from);
  hwloc_bitmap_free(m->to);
  g_array_unref(m->pairs);
  g_free(m);
}

static void
host_own(Work *k, const QpHost *from)
{
  QpHost *h = g_new(QpHost, 1);
  *h = *from;
  h->nodes = g_new(QpNode, MAX(from->n_nodes, 1));
  memcpy(h->nodes, from->nodes, sizeof(QpNode) * from->n_nodes);
  /* Pools of its own: a VM's hugepages that move change their free pages. */
  for (guint i = 0; i < h->n_nodes; i++)
    if (h->nodes[i].hugepages != NULL)
      h->nodes[i].hugepages = g_array_copy(h->nodes[i].hugepages);
  k->own_host = h;
  k->host = h;
}

static void
host_free(QpHost *h)
{
  if (h == NULL)
    return;
  for (guint i = 0; i < h->n_nodes; i++)
    if (h->nodes[i].hugepages != NULL)
      g_array_unref(h->nodes[i].hugepages);
  g_free(h->nodes);
  g_free(h);
}

/* The pages of C that leave its nodes as it moves (every node but KEEP,
 * a node id or -1; with ONLY, only those nodes): given back to what the
 * kernel can give there, and no longer C's resident memory. Called before
 * C's claim changes, so the trusted figures are the record's. */
static void
release_pages(Work *k, QpClaim *c, int keep, hwloc_const_bitmap_t only)
{
  for (guint x = c->resident->len; x-- > 0;) {
    int node = g_array_index(c->resident, QpNodeAmount, x).node;
    if (node == keep ||
        (only != NULL && !hwloc_bitmap_isset(only, (unsigned)node)))
      continue;
    guint64 r = qp_claim_resident_mib(c, node);
    int i = qp_host_node_index(k->host, node);
    if (i >= 0 && k->own_host->nodes[i].measured) {
      QpNode *n = &k->own_host->nodes[i];
      n->can_give_mib += r;
      n->used_mib = n->used_mib > r ? n->used_mib - r : 0;
    }
    g_array_remove_index(c->resident, x);
  }
}

static void
dedicated_changed(const Work *k)
{
  k->ded->valid = FALSE;
}

static DedCache *
ded_new(void)
{
  DedCache *d = g_new0(DedCache, 1);
  d->all = hwloc_bitmap_alloc();
  return d;
}

static void
ded_free(DedCache *d)
{
  if (d == NULL)
    return;
  hwloc_bitmap_free(d->all);
  g_free(d);
}

static void
work_clear(Work *k)
{
  g_clear_pointer(&k->ded, ded_free);
  g_clear_pointer(&k->own_host, host_free);
  k->host = NULL;
  g_clear_pointer(&k->w, qp_claims_free);
  g_clear_pointer(&k->vms, g_array_unref);
  g_clear_pointer(&k->moves, g_ptr_array_unref);
}

static void
work_copy(Work *dst, const Work *src)
{
  host_own(dst, src->host);
  dst->popts = src->popts;
  dst->w = claims_copy(src->w);
  dst->ded = ded_new();
  dst->vms = g_array_copy(src->vms);
  dst->moves = g_ptr_array_new_with_free_func(move_free);
}

static QpClaim *
claim_of(const Work *k, const Vm *v)
{
  return k->w->claims->pdata[v->ci];
}

static guint64
avail(const Work *k, guint i)
{
  return qp_node_uncommitted(k->host, k->w, k->popts, i, 0);
}

/* Dedicated CPUs of every claim but SKIP's (a new bitmap). */
static hwloc_bitmap_t
dedicated_others(const Work *k, const QpClaim *skip)
{
  DedCache *cache = k->ded;
  if (!cache->valid) {
    hwloc_bitmap_zero(cache->all);
    int weights = 0;
    for (guint x = 0; x < k->w->claims->len; x++) {
      const QpClaim *c = k->w->claims->pdata[x];
      if (hwloc_bitmap_iszero(c->dedicated))
        continue;
      hwloc_bitmap_or(cache->all, cache->all, c->dedicated);
      weights += hwloc_bitmap_weight(c->dedicated);
    }
    cache->valid = TRUE;
    cache->disjoint = weights == hwloc_bitmap_weight(cache->all);
  }
  hwloc_bitmap_t d = hwloc_bitmap_dup(cache->all);
  if (skip == NULL || hwloc_bitmap_iszero(skip->dedicated))
    return d;
  if (cache->disjoint) {
    hwloc_bitmap_andnot(d, d, skip->dedicated);
    return d;
  }
  hwloc_bitmap_zero(d);
  for (guint x = 0; x < k->w->claims->len; x++) {
    const QpClaim *c = k->w->claims->pdata[x];
    if (c != skip && !hwloc_bitmap_iszero(c->dedicated))
      hwloc_bitmap_or(d, d, c->dedicated);
  }
  return d;
}

/* Node index I lies where V was started: its host nodes and CPUs. */
static gboolean
allowed(const Work *k, const Vm *v, guint i)
{
  const QpNode *n = &k->host->nodes[i];
  if (qp_claims_node_blocked(k->w, n->id) || n->cpus == NULL ||
      hwloc_bitmap_iszero(n->cpus))
    return FALSE;
  if (v->in->nodes != NULL &&
      !hwloc_bitmap_isset(v->in->nodes, (unsigned)n->id))
    return FALSE;
  return v->in->cpus == NULL || hwloc_bitmap_intersects(v->in->cpus, n->cpus);
}

/* The reserve V was started with on node index I beyond the rebalance's
 * own: 0 when it is no larger. */
static guint64
reserve_beyond(const Work *k, const Vm *v, guint i)
{
  if (v->in->reserve == NULL || v->in->reserve->len == 0)
    return 0;
  int id = k->host->nodes[i].id;
  guint64 own = qp_node_amount_of(v->in->reserve, id);
  guint64 ours = qp_node_reserve_mib(k->popts, id);
  return own > ours ? own - ours : 0;
}

/* NEED MiB more of V fit on node index I under the reserve V was started
 * with, where it is larger than the rebalance's (AV, what the rebalance's
 * reserve leaves, says the rest): its keeper re-plans the move with its
 * own reserve, and would refuse it (robustness.md, finding 55). The
 * node's memory less that reserve and every claim (V's there among them,
 * so NEED is what arrives). */
static gboolean
own_reserve_fits(const Work *k, const Vm *v, guint i, guint64 need)
{
  guint64 beyond = reserve_beyond(k, v, i);
  if (beyond == 0 || need == 0)
    return TRUE;
  QpNodeMemory m;
  qp_node_memory(k->host, k->w, k->popts, i, &m);
  guint64 used = m.reserve_mib + beyond + m.claimed_mib;
  return m.plain_mib >= used && m.plain_mib - used >= need;
}

/* CPUs of node index I that V's vCPUs may float on (a new bitmap), DED
 * the CPUs dedicated to the other VMs. */
static hwloc_bitmap_t
usable_cpus_beside(const Work *k, const Vm *v, guint i,
                   hwloc_const_bitmap_t ded)
{
  hwloc_bitmap_t set = hwloc_bitmap_dup(k->host->nodes[i].cpus);
  hwloc_bitmap_andnot(set, set, ded);
  if (v->in->cpus != NULL)
    hwloc_bitmap_and(set, set, v->in->cpus);
  return set;
}

static hwloc_bitmap_t
usable_cpus(const Work *k, const Vm *v, guint i)
{
  g_auto(hwloc_bitmap_t) ded = dedicated_others(k, claim_of(k, v));
  return usable_cpus_beside(k, v, i, ded);
}

/* Free cores of node index I for V (indexes into host->cores): every PU
 * usable, none in DED (dedicated to another VM). */
static GArray *
free_cores_beside(const Work *k, const Vm *v, guint i, hwloc_const_bitmap_t ded)
{
  GArray *out = g_array_new(FALSE, FALSE, sizeof(guint));
  const QpNode *n = &k->host->nodes[i];
  for (guint c = 0; c < k->host->n_cores; c++) {
    const QpCore *core = &k->host->cores[c];
    if (core->node != n->id || hwloc_bitmap_intersects(core->pus, ded) ||
        !hwloc_bitmap_isincluded(core->pus, n->cpus) ||
        (v->in->cpus != NULL &&
         !hwloc_bitmap_isincluded(core->pus, v->in->cpus)))
      continue;
    g_array_append_val(out, c);
  }
  return out;
}

static GArray *
free_cores(const Work *k, const Vm *v, guint i)
{
  g_auto(hwloc_bitmap_t) ded = dedicated_others(k, claim_of(k, v));
  return free_cores_beside(k, v, i, ded);
}

/* ---- Moving one VM to one node ------------------------------------------- */

/* Node index I's pool of PAGE_KIB pages in K's own host, or NULL. */
static QpHugePool *
pool_of(const Work *k, guint i, guint64 page_kib)
{
  GArray *pools = k->own_host->nodes[i].hugepages;
  for (guint x = 0; pools != NULL && x < pools->len; x++)
    if (g_array_index(pools, QpHugePool, x).page_kib == page_kib)
      return &g_array_index(pools, QpHugePool, x);
  return NULL;
}

/* The pages of C's size PAGE_KIB that are not on node ID (ON: that are on
 * it). */
static guint64
huge_pages_where(const QpClaim *c, guint64 page_kib, int id, gboolean on)
{
  guint64 n = 0;
  for (guint x = 0; x < c->huge->len; x++) {
    const QpHugeClaim *h = &g_array_index(c->huge, QpHugeClaim, x);
    if (h->page_kib == page_kib && (h->node == id) == on)
      n += h->pages;
  }
  return n;
}

/* C's hugepages on node FROM fit in node index I's pools (a numa VM's
 * guest node moving there). */
static gboolean
huge_fits_from(const Work *k, const QpClaim *c, int from, guint i)
{
  for (guint x = 0; x < c->huge->len; x++) {
    const QpHugeClaim *h = &g_array_index(c->huge, QpHugeClaim, x);
    if (h->node != from || h->pages == 0)
      continue;
    guint64 need = huge_pages_where(c, h->page_kib, from, TRUE);
    if (qp_node_uncommitted(k->host, k->w, k->popts, i, h->page_kib) < need)
      return FALSE;
  }
  return TRUE;
}

/* C's hugepages elsewhere fit in node index I's pools: of each size, no
 * more than the pages there that no claim has and that are free. */
static gboolean
huge_fits(const Work *k, const QpClaim *c, guint i)
{
  int id = k->host->nodes[i].id;
  for (guint x = 0; x < c->huge->len; x++) {
    guint64 kib = g_array_index(c->huge, QpHugeClaim, x).page_kib;
    guint64 need = huge_pages_where(c, kib, id, FALSE);
    if (need > 0 && qp_node_uncommitted(k->host, k->w, k->popts, i, kib) < need)
      return FALSE;
  }
  return TRUE;
}

/* C's hugepages go to node index I, one entry per size, its pools giving
 * the pages that arrive. The pools they leave are not counted richer: a
 * backend's pages the guest never touched were never taken from them, and
 * the next look at the host says what the kernel has. */
static void
take_huge(Work *k, QpClaim *c, guint i)
{
  int id = k->host->nodes[i].id;
  for (guint x = 0; x < c->huge->len; x++) {
    QpHugeClaim *h = &g_array_index(c->huge, QpHugeClaim, x);
    guint64 arrive = huge_pages_where(c, h->page_kib, id, FALSE);
    QpHugePool *to = pool_of(k, i, h->page_kib);
    if (to != NULL)
      to->free -= MIN(to->free, arrive);
    /* The first entry of its size (the later ones go into it). */
    for (guint y = c->huge->len; y-- > x + 1;) {
      const QpHugeClaim *o = &g_array_index(c->huge, QpHugeClaim, y);
      if (o->page_kib == h->page_kib) {
        h->pages += o->pages;
        g_array_remove_index(c->huge, y);
      }
    }
    h->node = id;
  }
}

/* V (balanced or one-to-one) may run whole on node index I, memory aside:
 * inside where it was started, with its CPUs (free cores for one-to-one,
 * usable CPUs for its vCPUs) beside DED, the CPUs dedicated to the other
 * VMs (NULL: computed here). */
static gboolean
fits_cpus(const Work *k, const Vm *v, guint i, hwloc_const_bitmap_t ded)
{
  const QpClaim *c = claim_of(k, v);
  if (!allowed(k, v, i))
    return FALSE;
  guint ncores = cores_in(k->host, c->dedicated);
  guint vcpus = load_total(c);
  g_auto(hwloc_bitmap_t) own = NULL;
  if (ded == NULL && (ncores > 0 || vcpus > 0))
    ded = own = dedicated_others(k, c);
  if (ncores > 0) {
    g_autoptr(GArray) cores = free_cores_beside(k, v, i, ded);
    if (cores->len < ncores)
      return FALSE;
  }
  if (vcpus > 0) {
    g_auto(hwloc_bitmap_t) cpus = usable_cpus_beside(k, v, i, ded);
    if ((guint)hwloc_bitmap_weight(cpus) < vcpus)
      return FALSE;
  }
  return TRUE;
}

/* V (balanced or one-to-one) fits whole on node index I: *COST is the MiB
 * that change node. */
static gboolean
fits_single(const Work *k, const Vm *v, guint i, const guint64 *av,
            guint64 *cost)
{
  const QpClaim *c = claim_of(k, v);
  int id = k->host->nodes[i].id;
  guint64 total = mem_total(c), have = mem_on(c, id);
  if (av[i] + have < total || !own_reserve_fits(k, v, i, total - have) ||
      !huge_fits(k, c, i) || !fits_cpus(k, v, i, NULL))
    return FALSE;
  *cost = total - have + huge_mib_off(c, id);
  return TRUE;
}

static QpMove *
move_new(const Work *k, const QpClaim *c, gboolean consolidate)
{
  QpMove *m = g_new0(QpMove, 1);
  m->vm = g_strdup(c->id);
  m->mode = c->mode;
  m->from = nodes_of(k->host, c);
  m->pairs = g_array_new(FALSE, FALSE, sizeof(QpNodePair));
  m->consolidate = consolidate;
  m->relieves = -1;
  return m;
}

/* One-to-one: as many cores of node index I as C had, as many PUs of each
 * as it had per core. */
static void
take_cores(const Work *k, const Vm *v, QpClaim *c, guint i)
{
  guint ncores = cores_in(k->host, c->dedicated);
  guint per = ((guint)hwloc_bitmap_weight(c->dedicated) + ncores - 1) / ncores;
  g_autoptr(GArray) cores = free_cores(k, v, i);
  dedicated_changed(k);
  hwloc_bitmap_zero(c->dedicated);
  for (guint x = 0; x < ncores && x < cores->len; x++) {
    const QpCore *core = &k->host->cores[g_array_index(cores, guint, x)];
    guint taken = 0;
    for (int pu = hwloc_bitmap_first(core->pus); pu >= 0 && taken < per;
         pu = hwloc_bitmap_next(core->pus, pu), taken++)
      hwloc_bitmap_set(c->dedicated, (unsigned)pu);
  }
}

/* Moves V whole onto node index I; records the move. */
static void
apply_single(Work *k, Vm *v, guint i, guint64 cost, gboolean consolidate)
{
  QpClaim *c = claim_of(k, v);
  QpMove *m = move_new(k, c, consolidate);
  int id = k->host->nodes[i].id;
  guint64 total = mem_total(c);
  guint vcpus = load_total(c);
  release_pages(k, c, id, NULL);
  if (cores_in(k->host, c->dedicated) > 0)
    take_cores(k, v, c, i);
  take_huge(k, c, i);
  g_auto(hwloc_bitmap_t) cpus = usable_cpus(k, v, i);
  g_array_set_size(c->mem, 0);
  if (total > 0)
    g_array_append_val(c->mem, ((QpNodeAmount){id, total}));
  g_array_set_size(c->load, 0);
  g_array_set_size(c->cpu_load, 0);
  if (vcpus > 0) {
    g_array_append_val(c->load, ((QpNodeLoad){id, vcpus}));
    QpCpuLoad l = {hwloc_bitmap_dup(cpus), vcpus};
    g_array_append_val(c->cpu_load, l);
  }
  m->to = nodes_of(k->host, c);
  m->mib = cost;
  v->moved = TRUE;
  g_ptr_array_add(k->moves, m);
}

/* The best node for V outside AVOID (node ids, NULL: none): the fewest MiB
 * moved, then the least room left (keeping large holes whole), then the
 * lowest id. -1 when none holds it. */
static int
best_single(const Work *k, const Vm *v, hwloc_const_bitmap_t avoid,
            const guint64 *av, guint64 *cost)
{
  const QpClaim *c = claim_of(k, v);
  int best = -1;
  guint64 best_cost = 0, best_left = 0, total = mem_total(c);
  for (guint i = 0; i < k->host->n_nodes; i++) {
    guint64 cst;
    int id = k->host->nodes[i].id;
    if (avoid != NULL && hwloc_bitmap_isset(avoid, (unsigned)id))
      continue;
    if (!fits_single(k, v, i, av, &cst))
      continue;
    guint64 left = av[i] + mem_on(c, id) - total;
    if (best < 0 || cst < best_cost || (cst == best_cost && left < best_left)) {
      best = (int)i;
      best_cost = cst;
      best_left = left;
    }
  }
  *cost = best_cost;
  return best;
}

static guint64 *
avail_all(const Work *k)
{
  guint64 *av = g_new0(guint64, MAX(k->host->n_nodes, 1));
  for (guint i = 0; i < k->host->n_nodes; i++)
    av[i] = avail(k, i);
  return av;
}

static gboolean
spans(const Work *k, const QpClaim *c)
{
  if (c->mode != QP_MODE_BALANCED && c->mode != QP_MODE_ONE_TO_ONE)
    return FALSE;
  g_auto(hwloc_bitmap_t) n = nodes_of(k->host, c);
  return hwloc_bitmap_weight(n) > 1;
}

static guint
count_spanning(const Work *k)
{
  guint n = 0;
  for (guint x = 0; x < k->w->claims->len; x++)
    if (strcmp(((QpClaim *)k->w->claims->pdata[x])->id, REQ_ID) != 0 &&
        spans(k, k->w->claims->pdata[x]))
      n++;
  return n;
}

/* A move goal (a) may make: VM X whole onto node index I, COST MiB. */
typedef struct {
  guint64 cost;
  guint x, i;
} Candidate;

static gint
candidate_cmp(gconstpointer pa, gconstpointer pb)
{
  const Candidate *a = pa, *b = pb;
  if (a->cost != b->cost)
    return a->cost < b->cost ? -1 : 1;
  if (a->x != b->x)
    return a->x < b->x ? -1 : 1;
  return a->i < b->i ? -1 : a->i > b->i;
}

/* Goal (a): the cheapest move of a spanning VM onto one node, again and
 * again, while one fits: the fewest MiB moved, then the first VM, then the
 * node best_single() would choose for it. A move's cost (what of the VM is
 * off the node) does not change while the VM stays, so the candidates are
 * sorted once and each round takes the first that fits: the moves of a
 * scan of every VM and node each round (finding 46), without its square. */
static void
consolidate_greedy(Work *k)
{
  g_autoptr(GArray) cands = g_array_new(FALSE, FALSE, sizeof(Candidate));
  for (guint x = 0; x < k->vms->len; x++) {
    Vm *v = &g_array_index(k->vms, Vm, x);
    const QpClaim *c = claim_of(k, v);
    if (!v->movable || v->moved || !spans(k, c))
      continue;
    guint64 total = mem_total(c);
    for (guint i = 0; i < k->host->n_nodes; i++) {
      int id = k->host->nodes[i].id;
      Candidate cd = {total - mem_on(c, id) + huge_mib_off(c, id), x, i};
      g_array_append_val(cands, cd);
    }
  }
  g_array_sort(cands, candidate_cmp);
  guint first = 0; /* the candidates before are of VMs moved */
  for (;;) {
    g_autofree guint64 *av = avail_all(k);
    const Candidate *best = NULL;
    guint64 best_left = 0;
    for (guint j = first; j < cands->len; j++) {
      const Candidate *cd = &g_array_index(cands, Candidate, j);
      if (best != NULL && (cd->cost != best->cost || cd->x != best->x))
        break;
      Vm *v = &g_array_index(k->vms, Vm, cd->x);
      if (v->moved) {
        if (j == first)
          first++;
        continue;
      }
      guint64 cost;
      if (!fits_single(k, v, cd->i, av, &cost))
        continue;
      const QpClaim *c = claim_of(k, v);
      guint64 left =
          av[cd->i] + mem_on(c, k->host->nodes[cd->i].id) - mem_total(c);
      if (best == NULL || left < best_left) {
        best = cd;
        best_left = left;
      }
    }
    if (best == NULL)
      return;
    apply_single(k, &g_array_index(k->vms, Vm, best->x), best->i, best->cost,
                 TRUE);
  }
}

/* ---- Mode numa: the pieces on a set, each to a node of its own ----------- */

/* Plans where each piece of numa VM V on SET goes: a node outside SET and
 * outside V's nodes, best fit. Fills PAIRS; *COST the MiB moved. */
static gboolean
numa_targets(const Work *k, const Vm *v, hwloc_const_bitmap_t set,
             const guint64 *av, GArray *pairs, guint64 *cost)
{
  const QpClaim *c = claim_of(k, v);
  g_auto(hwloc_bitmap_t) used = nodes_of(k->host, c);
  hwloc_bitmap_or(used, used, set);
  *cost = 0;
  g_array_set_size(pairs, 0);
  g_auto(hwloc_bitmap_t) from = nodes_of(k->host, c);
  hwloc_bitmap_and(from, from, set);
  int f;
  hwloc_bitmap_foreach_begin(f, from)
  {
    guint64 need = mem_on(c, f);
    guint vcpus = load_on(c, f);
    int best = -1;
    for (guint i = 0; i < k->host->n_nodes; i++) {
      int id = k->host->nodes[i].id;
      if (hwloc_bitmap_isset(used, (unsigned)id) || !allowed(k, v, i) ||
          av[i] < need || !own_reserve_fits(k, v, i, need) ||
          !huge_fits_from(k, c, f, i))
        continue;
      g_auto(hwloc_bitmap_t) cpus = usable_cpus(k, v, i);
      if ((guint)hwloc_bitmap_weight(cpus) < vcpus)
        continue;
      if (best < 0 || av[i] < av[best])
        best = (int)i;
    }
    if (best < 0)
      return FALSE;
    hwloc_bitmap_set(used, (unsigned)k->host->nodes[best].id);
    g_array_append_val(pairs, ((QpNodePair){f, k->host->nodes[best].id}));
    *cost += need + huge_mib_where(c, f, TRUE);
  }
  hwloc_bitmap_foreach_end();
  return TRUE;
}

static void
apply_numa(Work *k, Vm *v, const GArray *pairs, guint64 cost)
{
  QpClaim *c = claim_of(k, v);
  QpMove *m = move_new(k, c, FALSE);
  g_auto(hwloc_bitmap_t) leaving = hwloc_bitmap_alloc();
  for (guint p = 0; p < pairs->len; p++)
    hwloc_bitmap_set(leaving,
                     (unsigned)g_array_index(pairs, QpNodePair, p).from);
  release_pages(k, c, -1, leaving);
  for (guint p = 0; p < pairs->len; p++) {
    const QpNodePair *np = &g_array_index(pairs, QpNodePair, p);
    int ti = qp_host_node_index(k->host, np->to);
    int fi = qp_host_node_index(k->host, np->from);
    for (guint x = 0; x < c->mem->len; x++)
      if (g_array_index(c->mem, QpNodeAmount, x).node == np->from)
        g_array_index(c->mem, QpNodeAmount, x).node = np->to;
    for (guint x = 0; x < c->load->len; x++)
      if (g_array_index(c->load, QpNodeLoad, x).node == np->from)
        g_array_index(c->load, QpNodeLoad, x).node = np->to;
    /* Its hugepages there go to the destination's pools, which give the
     * pages that arrive (the pools they leave are not counted richer, as
     * take_huge() says). */
    for (guint x = 0; x < c->huge->len; x++) {
      QpHugeClaim *h = &g_array_index(c->huge, QpHugeClaim, x);
      if (h->node != np->from)
        continue;
      QpHugePool *pool = pool_of(k, (guint)ti, h->page_kib);
      if (pool != NULL)
        pool->free -= MIN(pool->free, h->pages);
      h->node = np->to;
    }
    g_auto(hwloc_bitmap_t) cpus = usable_cpus(k, v, (guint)ti);
    for (guint x = 0; x < c->cpu_load->len; x++) {
      QpCpuLoad *l = &g_array_index(c->cpu_load, QpCpuLoad, x);
      if (fi >= 0 && hwloc_bitmap_isincluded(l->cpus, k->host->nodes[fi].cpus))
        hwloc_bitmap_copy(l->cpus, cpus);
    }
    g_array_append_val(m->pairs, *np);
  }
  m->to = nodes_of(k->host, c);
  m->mib = cost;
  v->moved = TRUE;
  g_ptr_array_add(k->moves, m);
}

/* ---- Goal (c): nodes whose claims exceed their memory -------------------- */

/* MiB by which the claims on node index I exceed its plain memory less the
 * reserve (status's "overcommitted"): 0 when they fit or it is blocked. */
static guint64
excess(const Work *k, guint i)
{
  if (qp_claims_node_blocked(k->w, k->host->nodes[i].id))
    return 0;
  QpNodeMemory m;
  qp_node_memory(k->host, k->w, k->popts, i, &m);
  return qp_node_memory_excess(&m);
}

/* Where V's memory on node id AVOID can go: balanced and one-to-one whole
 * to one other node (*TO, node index), numa its piece there to a node of
 * its own (PAIRS); *COST the MiB moved. FALSE when nowhere. */
static gboolean
relief_for(const Work *k, const Vm *v, hwloc_const_bitmap_t avoid,
           const guint64 *av, int *to, GArray *pairs, guint64 *cost)
{
  const QpClaim *c = claim_of(k, v);
  if (c->mode == QP_MODE_NUMA)
    return numa_targets(k, v, avoid, av, pairs, cost);
  if (c->mode != QP_MODE_BALANCED && c->mode != QP_MODE_ONE_TO_ONE)
    return FALSE;
  *to = best_single(k, v, avoid, av, cost);
  return *to >= 0;
}

/* Goal (c): VMs off each node whose claims exceed its memory (it shrank
 * under them), each to other nodes with room, until the node's claims fit
 * it or no VM can leave: of the VMs whose move alone is enough, the
 * cheapest; else the one that takes the most off it. */
static void
relieve(Work *k)
{
  g_autoptr(GArray) pairs = g_array_new(FALSE, FALSE, sizeof(QpNodePair));
  g_autoptr(GArray) best_pairs = g_array_new(FALSE, FALSE, sizeof(QpNodePair));
  for (guint i = 0; i < k->host->n_nodes; i++) {
    int id = k->host->nodes[i].id;
    g_auto(hwloc_bitmap_t) avoid = hwloc_bitmap_alloc();
    hwloc_bitmap_set(avoid, (unsigned)id);
    guint64 over;
    while ((over = excess(k, i)) > 0) {
      g_autofree guint64 *av = avail_all(k);
      Vm *best = NULL;
      int best_to = -1;
      guint64 best_cost = 0, best_off = 0;
      for (guint x = 0; x < k->vms->len; x++) {
        Vm *v = &g_array_index(k->vms, Vm, x);
        guint64 off = mem_on(claim_of(k, v), id), cost = 0;
        int to = -1;
        if (!v->movable || v->moved || off == 0 ||
            !relief_for(k, v, avoid, av, &to, pairs, &cost))
          continue;
        gboolean enough = off >= over, best_enough = best_off >= over;
        if (best == NULL || (enough && !best_enough) ||
            (enough && best_enough && cost < best_cost) ||
            (!enough && !best_enough && off > best_off)) {
          best = v;
          best_to = to;
          best_cost = cost;
          best_off = off;
          g_array_set_size(best_pairs, 0);
          g_array_append_vals(best_pairs, pairs->data, pairs->len);
        }
      }
      if (best == NULL)
        break;
      if (claim_of(k, best)->mode == QP_MODE_NUMA)
        apply_numa(k, best, best_pairs, best_cost);
      else
        apply_single(k, best, (guint)best_to, best_cost, FALSE);
      ((QpMove *)k->moves->pdata[k->moves->len - 1])->relieves = id;
    }
  }
}

/* ---- Goal (b): room for the request -------------------------------------- */

/* Nodes the request's plan takes on K's claims (0: it does not fit); the
 * plan in *OUT when OUT is not NULL. */
static gboolean
req_nodes(const Work *k, const QpRequest *req, const QpPlacementOptions *opts,
          guint *n, QpPlan **out, GError **error)
{
  g_autoptr(GError) local = NULL;
  g_autoptr(QpPlan) plan = qp_plan_compute(k->host, k->w, req, opts, &local);
  *n = 0;
  if (plan == NULL) {
    if (g_error_matches(local, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT))
      return TRUE;
    g_propagate_error(error, g_steal_pointer(&local));
    return FALSE;
  }
  *n = plan->host_nodes != NULL ? (guint)hwloc_bitmap_weight(plan->host_nodes)
                                : 1;
  if (out != NULL)
    *out = g_steal_pointer(&plan);
  return TRUE;
}

/* Ordinary memory the request asks for at start. */
static guint64
req_mem(const QpRequest *req)
{
  guint64 m = req->n_gnodes == 0 && req->page_kib != 0 ? 0 : req->mem_mib;
  for (guint g = 0; g < req->n_gnodes; g++)
    if (req->gnodes[g].page_kib != 0)
      m -= MIN(m, req->gnodes[g].mem_mib);
  for (guint d = 0; d < req->n_devmem; d++)
    if (req->devmem[d].page_kib == 0)
      m += req->devmem[d].mib;
  return m;
}

static guint64
set_avail(const Work *k, hwloc_const_bitmap_t set, const guint64 *av)
{
  guint64 m = 0;
  for (guint i = 0; i < k->host->n_nodes; i++)
    if (hwloc_bitmap_isset(set, (unsigned)k->host->nodes[i].id))
      m += av[i];
  return m;
}

/* What evicting V from SET costs and frees; *NODE (single) or PAIRS
 * (numa) say where it goes. FALSE: it has nothing there or cannot go. */
static gboolean
eviction(const Work *k, const Vm *v, hwloc_const_bitmap_t set,
         const guint64 *av, int *node, GArray *pairs, guint64 *cost,
         guint64 *freed)
{
  const QpClaim *c = claim_of(k, v);
  g_auto(hwloc_bitmap_t) on = nodes_of(k->host, c);
  if (!hwloc_bitmap_intersects(on, set))
    return FALSE;
  *freed = 0;
  int f;
  hwloc_bitmap_foreach_begin(f, set) *freed += mem_on(c, f);
  hwloc_bitmap_foreach_end();
  *node = -1;
  if (c->mode == QP_MODE_NUMA)
    return numa_targets(k, v, set, av, pairs, cost);
  *node = best_single(k, v, set, av, cost);
  return *node >= 0;
}

/* The next VM to evict from SET, short of DEFICIT MiB: the cheapest one
 * that frees it alone, else the one that frees most (the cheapest on a
 * tie); with no deficit (CPUs are short), the cheapest with vCPUs there.
 * -1: none can go. */
static int
next_eviction(const Work *k, hwloc_const_bitmap_t set, const guint64 *av,
              guint64 deficit, int *node, GArray *pairs, guint64 *cost)
{
  int cover = -1, most = -1, cover_node = -1, most_node = -1;
  guint64 cover_cost = 0, most_cost = 0, most_freed = 0;
  g_autoptr(GArray) p = g_array_new(FALSE, FALSE, sizeof(QpNodePair));
  g_autoptr(GArray) cover_pairs = g_array_new(FALSE, FALSE, sizeof(QpNodePair));
  g_autoptr(GArray) most_pairs = g_array_new(FALSE, FALSE, sizeof(QpNodePair));
  for (guint x = 0; x < k->vms->len; x++) {
    const Vm *v = &g_array_index(k->vms, Vm, x);
    int n;
    guint64 cst, freed;
    if (!v->movable || v->moved ||
        !eviction(k, v, set, av, &n, p, &cst, &freed))
      continue;
    if (freed >= deficit && (cover < 0 || cst < cover_cost)) {
      cover = (int)x, cover_node = n, cover_cost = cst;
      g_array_set_size(cover_pairs, 0);
      g_array_append_vals(cover_pairs, p->data, p->len);
    }
    if (most < 0 || freed > most_freed ||
        (freed == most_freed && cst < most_cost)) {
      most = (int)x, most_node = n, most_cost = cst, most_freed = freed;
      g_array_set_size(most_pairs, 0);
      g_array_append_vals(most_pairs, p->data, p->len);
    }
  }
  gboolean use_cover = cover >= 0;
  *node = use_cover ? cover_node : most_node;
  *cost = use_cover ? cover_cost : most_cost;
  GArray *src = use_cover ? cover_pairs : most_pairs;
  g_array_set_size(pairs, 0);
  g_array_append_vals(pairs, src->data, src->len);
  return use_cover ? cover : most;
}

/* Evicts VMs from SET until the request fits there. */
static gboolean
clear_set(Work *k, const QpRequest *req, const QpPlacementOptions *opts,
          hwloc_const_bitmap_t set, guint want, GError **error)
{
  QpPlacementOptions o = *opts;
  g_auto(hwloc_bitmap_t) nodes = hwloc_bitmap_dup(set);
  if (opts->hostnodes != NULL)
    hwloc_bitmap_and(nodes, nodes, opts->hostnodes);
  o.hostnodes = nodes;
  guint64 need = req_mem(req);
  g_autoptr(GArray) pairs = g_array_new(FALSE, FALSE, sizeof(QpNodePair));
  for (guint step = 0; step <= k->vms->len; step++) {
    guint n;
    if (!req_nodes(k, req, &o, &n, NULL, error))
      return FALSE;
    if (n > 0 && n <= want)
      return TRUE;
    g_autofree guint64 *av = avail_all(k);
    guint64 have = set_avail(k, set, av);
    int node;
    guint64 cost;
    int x = next_eviction(k, set, av, need > have ? need - have : 0, &node,
                          pairs, &cost);
    if (x < 0)
      return TRUE; /* no fit: the caller sees the request still refused */
    Vm *v = &g_array_index(k->vms, Vm, x);
    if (node >= 0)
      apply_single(k, v, (guint)node, cost, FALSE);
    else
      apply_numa(k, v, pairs, cost);
  }
  return TRUE;
}

/* Candidate sets of K nodes: each node with its K - 1 closest (lowest id
 * on a tie), each set once; inside the request's host nodes. */
static GPtrArray *
candidate_sets(const QpHost *host, const QpPlacementOptions *opts, guint k)
{
  GPtrArray *sets =
      g_ptr_array_new_with_free_func((GDestroyNotify)hwloc_bitmap_free);
  guint nn = host->n_nodes;
  g_autofree guint *order = g_new(guint, MAX(nn, 1));
  for (guint s = 0; s < nn; s++) {
    guint m = 0;
    for (guint i = 0; i < nn; i++)
      if (opts->hostnodes == NULL ||
          hwloc_bitmap_isset(opts->hostnodes, (unsigned)host->nodes[i].id))
        order[m++] = i;
    /* By distance from s (s itself first), stable on ties. */
    for (guint x = 1; x < m; x++)
      for (guint y = x; y > 0 && host->distance[s * nn + order[y - 1]] >
                                     host->distance[s * nn + order[y]];
           y--) {
        guint t = order[y];
        order[y] = order[y - 1];
        order[y - 1] = t;
      }
    if (m < k || order[0] != s)
      continue;
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    for (guint j = 0; j < k; j++)
      hwloc_bitmap_set(set, (unsigned)host->nodes[order[j]].id);
    gboolean seen = FALSE;
    for (guint x = 0; x < sets->len && !seen; x++)
      seen = hwloc_bitmap_isequal(sets->pdata[x], set);
    if (seen)
      hwloc_bitmap_free(set);
    else
      g_ptr_array_add(sets, set);
  }
  return sets;
}

/* The fewest nodes any set could hold the request on, on an empty host
 * (no claim, no VM's pages). */
static guint
least_nodes(const QpHost *host, const QpRequest *req,
            const QpPlacementOptions *opts)
{
  guint64 need = req_mem(req);
  for (guint k = 1; k <= host->n_nodes; k++) {
    g_autoptr(GPtrArray) sets = candidate_sets(host, opts, k);
    for (guint x = 0; x < sets->len; x++) {
      guint64 mem = 0;
      guint cpus = 0;
      for (guint i = 0; i < host->n_nodes; i++)
        if (hwloc_bitmap_isset(sets->pdata[x], (unsigned)host->nodes[i].id)) {
          QpNodeMemory m;
          qp_node_memory(host, NULL, opts, i, &m);
          /* The node's room without any claim: on a measured host what
           * the kernel can give now is less by every VM's pages, which
           * the moves may take away. */
          mem += m.room_mib;
          cpus += host->nodes[i].cpus != NULL
                      ? (guint)hwloc_bitmap_weight(host->nodes[i].cpus)
                      : 0;
        }
      if (mem >= need && cpus >= req->vcpus)
        return k;
    }
  }
  return host->n_nodes;
}

static guint64
moves_mib(const GPtrArray *moves)
{
  guint64 m = 0;
  for (guint x = 0; x < moves->len; x++)
    m += ((const QpMove *)moves->pdata[x])->mib;
  return m;
}

/* ---- Goal (b): the bounded search ---------------------------------------- */

/* The search's bounds: moves in one plan, plans looked at (expansions) per
 * candidate set and per rebalance. */
#define SEARCH_MOVES 12
#define SEARCH_SET_EXPANSIONS 2048
#define SEARCH_EXPANSIONS 8192

typedef struct {
  guint vm;   /* index into the Work's vms */
  guint node; /* index into host->nodes */
} Step;

/* A light copy of the Work for the search: memory per VM and node, room per
 * node, where each VM may go (its CPUs and cores as they are now). Steps
 * are made and undone in place. */
typedef struct {
  guint nn, nv;
  const gboolean *in_set; /* per node index: in the set being cleared */
  guint64 *av;            /* per node: uncommitted, as the steps leave it */
  guint64 *mem;           /* nv x nn: each VM's memory per node, likewise */
  guint64 *saved;         /* nv x nn: a moved VM's memory before its step */
  guint64 *total;         /* per VM */
  gboolean *ok;           /* nv x nn: the VM may go there, memory aside */
  gboolean *moved;        /* per VM */
  GArray **on;            /* per node: VMs (guint) with memory there at first,
                             outside the set (those chains may move away) */
  guint *cands;           /* VMs with memory on the set, most there first */
  guint n_cands;
  guint64 *suffix;      /* what cands[x..] hold on the set */
  guint *dest;          /* (SEARCH_MOVES + 1) x nn: each depth's nodes */
  GArray *steps, *best; /* of Step */
  guint64 best_cost;    /* MiB of BEST; the bound to beat */
  guint expansions, limit;
} Search;

static guint64
search_on_set(const Search *s, guint v)
{
  guint64 m = 0;
  for (guint i = 0; i < s->nn; i++)
    if (s->in_set[i])
      m += s->mem[v * s->nn + i];
  return m;
}

/* V may go whole to node I now: *COST the MiB that change node. */
static gboolean
search_fits(const Search *s, guint v, guint i, guint64 *cost)
{
  guint64 have = s->mem[v * s->nn + i];
  if (s->moved[v] || s->in_set[i] || !s->ok[v * s->nn + i] ||
      s->av[i] + have < s->total[v])
    return FALSE;
  *cost = s->total[v] - have;
  return TRUE;
}

static void
search_step(Search *s, guint v, guint i)
{
  guint64 *m = &s->mem[v * s->nn], *sv = &s->saved[v * s->nn];
  for (guint n = 0; n < s->nn; n++) {
    sv[n] = m[n];
    s->av[n] += m[n];
    m[n] = 0;
  }
  s->av[i] -= s->total[v];
  m[i] = s->total[v];
  s->moved[v] = TRUE;
  g_array_append_val(s->steps, ((Step){v, i}));
}

static void
search_undo(Search *s)
{
  Step st = g_array_index(s->steps, Step, s->steps->len - 1);
  guint64 *m = &s->mem[st.vm * s->nn], *sv = &s->saved[st.vm * s->nn];
  g_array_set_size(s->steps, s->steps->len - 1);
  s->av[st.node] += s->total[st.vm];
  for (guint n = 0; n < s->nn; n++) {
    m[n] = sv[n];
    s->av[n] -= sv[n];
  }
  s->moved[st.vm] = FALSE;
}

/* The node where V goes with the fewest MiB moved, then the least room
 * left, outside AVOID (a node index) too; -1: none. */
static int
search_best_fit(const Search *s, guint v, guint avoid, guint64 *cost)
{
  int best = -1;
  guint64 best_cost = 0, best_left = 0;
  for (guint i = 0; i < s->nn; i++) {
    guint64 c;
    if (i == avoid || !search_fits(s, v, i, &c))
      continue;
    guint64 left = s->av[i] + s->mem[v * s->nn + i] - s->total[v];
    if (best < 0 || c < best_cost || (c == best_cost && left < best_left)) {
      best = (int)i;
      best_cost = c;
      best_left = left;
    }
  }
  *cost = best_cost;
  return best;
}

static void search_dfs(Search *s, guint used, guint64 cost, guint64 deficit,
                       guint first);

/* Chain: the VMs US (N of them) from node Y, each to its best fit, then
 * cands[CI] to Y; on with the rest. */
static void
search_chain(Search *s, guint ci, guint y, const guint *us, guint n, guint used,
             guint64 cost, guint64 deficit)
{
  guint v = s->cands[ci], made = 0;
  guint64 sub = 0, c;
  if (++s->expansions >= s->limit)
    return;
  for (; made < n; made++) {
    guint64 uc;
    int z = search_best_fit(s, us[made], y, &uc);
    if (z < 0)
      break;
    search_step(s, us[made], (guint)z);
    sub += uc;
  }
  if (made == n && search_fits(s, v, y, &c)) {
    guint64 freed = search_on_set(s, v);
    search_step(s, v, y);
    search_dfs(s, used + n + 1, cost + sub + c,
               deficit > freed ? deficit - freed : 0, ci + 1);
    search_undo(s);
  }
  while (made-- > 0)
    search_undo(s);
}

/* Evicts cands[FIRST..] (each once, in their order) until DEFICIT MiB are
 * free on the set; USED steps so far moved COST MiB. */
static void
search_dfs(Search *s, guint used, guint64 cost, guint64 deficit, guint first)
{
  s->expansions++;
  if (deficit == 0) {
    if (cost < s->best_cost) {
      s->best_cost = cost;
      g_array_set_size(s->best, 0);
      g_array_append_vals(s->best, s->steps->data, s->steps->len);
    }
    return;
  }
  /* Freeing a MiB moves at least that MiB. */
  if (cost + deficit >= s->best_cost || used >= SEARCH_MOVES ||
      s->expansions >= s->limit)
    return;
  guint *dest = &s->dest[used * s->nn]; /* each frame has its own USED */
  for (guint ci = first; ci < s->n_cands && s->expansions < s->limit; ci++) {
    if (s->suffix[ci] < deficit)
      break; /* the rest cannot free it */
    guint v = s->cands[ci];
    guint64 freed = search_on_set(s, v), c;
    guint64 rest = deficit > freed ? deficit - freed : 0;
    /* Straight to a node with room, the best fit first; holes of the same
     * size where V has nothing are the same hole. */
    guint nd = 0;
    for (guint i = 0; i < s->nn; i++) {
      if (!search_fits(s, v, i, &c))
        continue;
      guint64 left = s->av[i] + s->mem[v * s->nn + i] - s->total[v];
      gboolean same = FALSE;
      for (guint d = 0; d < nd && !same; d++)
        same = s->mem[v * s->nn + i] == 0 && s->mem[v * s->nn + dest[d]] == 0 &&
               s->av[dest[d]] == s->av[i];
      if (same)
        continue;
      guint d = nd++;
      for (; d > 0; d--) {
        guint o = dest[d - 1];
        guint64 oc = s->total[v] - s->mem[v * s->nn + o];
        guint64 ol = s->av[o] + s->mem[v * s->nn + o] - s->total[v];
        if (oc < c || (oc == c && ol <= left))
          break;
        dest[d] = o;
      }
      dest[d] = i;
    }
    for (guint d = 0; d < nd; d++) {
      search_fits(s, v, dest[d], &c);
      search_step(s, v, dest[d]);
      search_dfs(s, used + 1, cost + c, rest, ci + 1);
      search_undo(s);
    }
    /* To a node made room on by moving one or two of its VMs (none on the
     * set) to nodes with room. */
    for (guint y = 0; y < s->nn && used + 2 <= SEARCH_MOVES; y++) {
      if (s->in_set[y] || !s->ok[v * s->nn + y])
        continue;
      guint64 need = s->total[v] - s->mem[v * s->nn + y];
      if (s->av[y] >= need)
        continue;
      guint64 shortfall = need - s->av[y];
      const GArray *on = s->on[y];
      for (guint a = 0; a < on->len; a++) {
        guint u = g_array_index(on, guint, a);
        if (u == v || s->moved[u])
          continue;
        guint64 ua = s->mem[u * s->nn + y];
        if (ua >= shortfall) {
          search_chain(s, ci, y, &u, 1, used, cost, deficit);
          continue;
        }
        for (guint b = a + 1; b < on->len && used + 3 <= SEARCH_MOVES; b++) {
          guint w = g_array_index(on, guint, b);
          if (w == v || s->moved[w] || ua + s->mem[w * s->nn + y] < shortfall ||
              s->mem[w * s->nn + y] >= shortfall)
            continue;
          guint pair[2] = {u, w};
          search_chain(s, ci, y, pair, 2, used, cost, deficit);
        }
      }
    }
  }
}

static void
search_clear(Search *s)
{
  for (guint i = 0; s->on != NULL && i < s->nn; i++)
    g_array_unref(s->on[i]);
  g_free(s->on);
  g_free(s->av);
  g_free(s->mem);
  g_free(s->saved);
  g_free(s->total);
  g_free(s->ok);
  g_free(s->moved);
  g_free(s->cands);
  g_free(s->suffix);
  g_free(s->dest);
  g_array_unref(s->steps);
  g_array_unref(s->best);
}

/* What the search starts from, the same for every set of one make_room:
 * room per node, memory per VM and node, where each VM may go (memory
 * aside), which VMs never step. */
typedef struct {
  guint nn, nv;
  guint64 *av, *mem, *total;
  gboolean *ok, *fixed;
} SearchBase;

static void
search_base_init(SearchBase *b, const Work *k)
{
  guint nn = k->host->n_nodes, nv = k->vms->len;
  b->nn = nn;
  b->nv = nv;
  b->av = avail_all(k);
  b->mem = g_new0(guint64, MAX(nv * nn, 1));
  b->total = g_new0(guint64, MAX(nv, 1));
  b->ok = g_new0(gboolean, MAX(nv * nn, 1));
  b->fixed = g_new0(gboolean, MAX(nv, 1));
  for (guint x = 0; x < nv; x++) {
    const Vm *v = &g_array_index(k->vms, Vm, x);
    const QpClaim *c = claim_of(k, v);
    /* The search weighs ordinary memory under the rebalance's reserve: a
     * VM with hugepages, or started with a larger reserve on some node,
     * moves by the greedy's checks alone. */
    gboolean beyond = FALSE;
    for (guint i = 0; i < nn && !beyond; i++)
      beyond = reserve_beyond(k, v, i) > 0;
    b->fixed[x] =
        !v->movable || v->moved || c->huge->len > 0 || beyond ||
        (c->mode != QP_MODE_BALANCED && c->mode != QP_MODE_ONE_TO_ONE);
    if (b->fixed[x])
      continue;
    g_auto(hwloc_bitmap_t) ded = dedicated_others(k, c);
    for (guint i = 0; i < nn; i++) {
      b->mem[x * nn + i] = mem_on(c, k->host->nodes[i].id);
      b->total[x] += b->mem[x * nn + i];
      b->ok[x * nn + i] = fits_cpus(k, v, i, ded);
    }
  }
}

static void
search_base_clear(SearchBase *b)
{
  g_clear_pointer(&b->av, g_free);
  g_clear_pointer(&b->mem, g_free);
  g_clear_pointer(&b->total, g_free);
  g_clear_pointer(&b->ok, g_free);
  g_clear_pointer(&b->fixed, g_free);
}

/* The plan of fewest MiB, under BOUND, that frees NEED MiB on SET (node
 * ids) by moving balanced and one-to-one VMs whole to one node each,
 * within the search's bounds; *BUDGET expansions left for the rebalance.
 * NULL: none found. */
static GArray *
search_set(const Work *k, const SearchBase *b, hwloc_const_bitmap_t set,
           guint64 need, guint64 bound, guint *budget)
{
  guint nn = b->nn, nv = b->nv;
  g_autofree gboolean *in_set = g_new0(gboolean, MAX(nn, 1));
  guint64 have = 0, outside = 0;
  for (guint i = 0; i < nn; i++) {
    in_set[i] = hwloc_bitmap_isset(set, (unsigned)k->host->nodes[i].id);
    if (in_set[i])
      have += b->av[i];
    else
      outside += b->av[i];
  }
  /* Memory short (CPUs short are the greedy's), and room outside for what
   * leaves. */
  if (have >= need || outside < need - have || *budget == 0)
    return NULL;
  Search s = {nn, nv, in_set};
  s.av = g_memdup2(b->av, sizeof(guint64) * MAX(nn, 1));
  s.mem = g_memdup2(b->mem, sizeof(guint64) * MAX(nv * nn, 1));
  s.saved = g_new0(guint64, MAX(nv * nn, 1));
  s.total = g_memdup2(b->total, sizeof(guint64) * MAX(nv, 1));
  s.ok = g_memdup2(b->ok, sizeof(gboolean) * MAX(nv * nn, 1));
  s.moved = g_memdup2(b->fixed, sizeof(gboolean) * MAX(nv, 1));
  s.on = g_new0(GArray *, MAX(nn, 1));
  s.cands = g_new0(guint, MAX(nv, 1));
  s.suffix = g_new0(guint64, nv + 1);
  s.dest = g_new0(guint, (SEARCH_MOVES + 1) * MAX(nn, 1));
  s.steps = g_array_new(FALSE, FALSE, sizeof(Step));
  s.best = g_array_new(FALSE, FALSE, sizeof(Step));
  s.best_cost = bound;
  for (guint i = 0; i < nn; i++)
    s.on[i] = g_array_new(FALSE, FALSE, sizeof(guint));
  for (guint x = 0; x < nv; x++) {
    if (s.moved[x])
      continue; /* never steps */
    guint64 on_set = search_on_set(&s, x);
    for (guint i = 0; i < nn; i++)
      if (!in_set[i] && on_set == 0 && s.mem[x * nn + i] > 0)
        g_array_append_val(s.on[i], x);
    if (on_set == 0)
      continue;
    /* Most on the set first. */
    guint d = s.n_cands++;
    for (; d > 0 && search_on_set(&s, s.cands[d - 1]) < on_set; d--)
      s.cands[d] = s.cands[d - 1];
    s.cands[d] = x;
  }
  for (guint x = s.n_cands; x-- > 0;)
    s.suffix[x] = s.suffix[x + 1] + search_on_set(&s, s.cands[x]);
  GArray *out = NULL;
  if (have + s.suffix[0] >= need) {
    s.limit = MIN(*budget, SEARCH_SET_EXPANSIONS);
    search_dfs(&s, 0, 0, need - have, 0);
    *budget -= MIN(*budget, s.expansions);
    if (s.best->len > 0)
      out = g_array_ref(s.best);
  }
  search_clear(&s);
  return out;
}

/* Makes STEPS on K, each checked as the greedy's moves are. */
static gboolean
replay_steps(Work *k, const GArray *steps)
{
  for (guint x = 0; x < steps->len; x++) {
    const Step *st = &g_array_index(steps, Step, x);
    Vm *v = &g_array_index(k->vms, Vm, st->vm);
    g_autofree guint64 *av = avail_all(k);
    guint64 cost;
    if (!v->movable || v->moved || !fits_single(k, v, st->node, av, &cost))
      return FALSE;
    apply_single(k, v, st->node, cost, FALSE);
  }
  return TRUE;
}

/* K becomes T, a copy of K with moves made since; T is cleared. */
static void
work_adopt(Work *k, Work *t)
{
  qp_claims_free(k->w);
  g_array_unref(k->vms);
  k->w = g_steal_pointer(&t->w);
  dedicated_changed(k);
  k->vms = g_steal_pointer(&t->vms);
  host_free(k->own_host);
  k->own_host = g_steal_pointer(&t->own_host);
  k->host = k->own_host;
  for (guint x = 0; x < t->moves->len; x++)
    g_ptr_array_add(k->moves, g_steal_pointer(&t->moves->pdata[x]));
  work_clear(t);
}

/* Goal (b): the fewest nodes for the request that some set can be cleared
 * for, the set whose evictions move the fewest MiB. */
static gboolean
make_room(Work *k, const QpRequest *req, const QpPlacementOptions *opts,
          guint before, GError **error)
{
  /* Moves only carry claims from node to node: when the host's room (its
   * nodes' memory less reserve and claims) is short of the request, no
   * moves make it fit. */
  guint64 room = 0;
  for (guint i = 0; i < k->host->n_nodes; i++) {
    QpNodeMemory m;
    qp_node_memory(k->host, k->w, opts, i, &m);
    room += m.room_mib;
  }
  if (room < req_mem(req))
    return TRUE;
  guint lo = least_nodes(k->host, req, opts);
  guint hi = before > 0 ? before - 1 : k->host->n_nodes;
  guint budget = SEARCH_EXPANSIONS;
  SearchBase base = {0};
  for (guint want = lo; want <= hi; want++) {
    g_autoptr(GPtrArray) sets = candidate_sets(k->host, opts, want);
    Work best = {0};
    /* Each set by the greedy, then by the search for a plan that moves
     * fewer MiB than the best so far. */
    for (guint x = 0; x < 2 * sets->len; x++) {
      hwloc_const_bitmap_t set = sets->pdata[x % sets->len];
      g_autoptr(GArray) steps = NULL;
      if (x >= sets->len) {
        if (base.av == NULL)
          search_base_init(&base, k);
        steps = search_set(k, &base, set, req_mem(req),
                           best.w != NULL ? moves_mib(best.moves) : G_MAXUINT64,
                           &budget);
        if (steps == NULL)
          continue;
      }
      Work t;
      work_copy(&t, k);
      guint n = 0;
      /* A search's plan that does not hold step by step is dropped. */
      gboolean made = steps != NULL ? replay_steps(&t, steps) : TRUE;
      if ((steps == NULL && !clear_set(&t, req, opts, set, want, error)) ||
          (made && !req_nodes(&t, req, opts, &n, NULL, error))) {
        work_clear(&t);
        work_clear(&best);
        search_base_clear(&base);
        return FALSE;
      }
      if (made && n > 0 && n <= want &&
          (best.w == NULL || moves_mib(t.moves) < moves_mib(best.moves))) {
        work_clear(&best);
        best = t;
      } else {
        work_clear(&t);
      }
    }
    if (best.w != NULL) {
      work_adopt(k, &best);
      break;
    }
  }
  search_base_clear(&base);
  return TRUE;
}

/* ---- Goal (a) by chains -------------------------------------------------- */

/* The best chain for spanning VM X onto node index I, cheaper than BOUND
 * MiB in all: the search's evictions from I (X itself never steps), then X
 * there. A Work of those moves (the caller's to clear), or w NULL. */
static Work
chain_for(const Work *k, SearchBase *base, guint x, guint i, guint64 bound,
          guint *budget)
{
  Work t = {0};
  const Vm *v = &g_array_index(k->vms, Vm, x);
  const QpClaim *c = claim_of(k, v);
  guint64 total = mem_total(c), need = total - mem_on(c, k->host->nodes[i].id);
  /* Others move at most as many MiB as X holds, and fewer than the best
   * chain so far once X's own MiB are counted. */
  guint64 cap = MIN(total + 1, bound > need ? bound - need : 0);
  if (cap == 0 || !base->ok[x * base->nn + i]) /* its CPUs do not fit there */
    return t;
  g_auto(hwloc_bitmap_t) set = hwloc_bitmap_alloc();
  hwloc_bitmap_set(set, (unsigned)k->host->nodes[i].id);
  gboolean fixed = base->fixed[x];
  base->fixed[x] = TRUE;
  g_autoptr(GArray) steps = search_set(k, base, set, need, cap, budget);
  base->fixed[x] = fixed;
  if (steps == NULL)
    return t;
  work_copy(&t, k);
  if (replay_steps(&t, steps)) {
    Vm *tv = &g_array_index(t.vms, Vm, x);
    g_autofree guint64 *av = avail_all(&t);
    guint64 cost;
    if (fits_single(&t, tv, i, av, &cost)) {
      apply_single(&t, tv, i, cost, TRUE);
      return t;
    }
  }
  work_clear(&t);
  return t;
}

/* Goal (a) where no node has the room as things stand: a spanning VM onto
 * the node where moving others first (each whole to one node, as goal
 * (b)'s search moves them, chains included) makes that room, the chain of
 * fewest MiB in all first, again while one is found. Others move at most
 * as many MiB as the VM holds; no move makes a VM span. */
static void
consolidate(Work *k)
{
  guint budget = SEARCH_EXPANSIONS;
  for (;;) {
    consolidate_greedy(k);
    if (budget == 0)
      return;
    SearchBase base = {0};
    search_base_init(&base, k);
    Work best = {0};
    guint64 best_mib = G_MAXUINT64;
    for (guint x = 0; x < k->vms->len && budget > 0; x++) {
      const Vm *v = &g_array_index(k->vms, Vm, x);
      if (!v->movable || v->moved || !spans(k, claim_of(k, v)))
        continue;
      for (guint i = 0; i < k->host->n_nodes && budget > 0; i++) {
        Work t = chain_for(k, &base, x, i, best_mib, &budget);
        if (t.w == NULL)
          continue;
        guint64 mib = moves_mib(t.moves);
        if (mib < best_mib) {
          work_clear(&best);
          best = t;
          best_mib = mib;
        } else {
          work_clear(&t);
        }
      }
    }
    search_base_clear(&base);
    if (best.w == NULL)
      return;
    work_adopt(k, &best);
  }
}

/* ---- The entry point ----------------------------------------------------- */

static const QpRebalanceVm *
vm_input(const QpRebalanceVm *vms, guint n, const char *id)
{
  for (guint x = 0; x < n; x++)
    if (vms[x].id != NULL && id != NULL && strcmp(vms[x].id, id) == 0)
      return &vms[x];
  return NULL;
}

/* Why C may not move, or NULL. */
static const char *
why_kept(const QpClaim *c, const QpRebalanceVm *in, const QpRebalanceOptions *o)
{
  if (in == NULL)
    return "not among the VMs the rebalance may move";
  if (in->caller_set)
    return "its placement is the caller's own";
  if (in->why != NULL)
    return in->why;
  if (in->vfio || qp_claim_has_vfio(c))
    return "it has VFIO devices (pinned pages)";
  if (c->mode != QP_MODE_BALANCED && c->mode != QP_MODE_NUMA &&
      c->mode != QP_MODE_ONE_TO_ONE)
    return "qemu-pin does not place it (mode none)";
  if (in->moved_at > 0 && o->now - in->moved_at < o->cooldown_s)
    return "it moved less than the cooldown ago";
  return NULL;
}

static void
work_init(Work *k, const QpHost *host, const QpClaims *claims,
          const QpRebalanceVm *vms, guint n_vms, const QpRebalanceOptions *o,
          const QpPlacementOptions *popts, GPtrArray *kept)
{
  host_own(k, host);
  k->popts = popts;
  k->w = claims_copy(claims);
  k->ded = ded_new();
  k->vms = g_array_new(FALSE, TRUE, sizeof(Vm));
  k->moves = g_ptr_array_new_with_free_func(move_free);
  for (guint x = 0; x < k->w->claims->len; x++) {
    const QpClaim *c = k->w->claims->pdata[x];
    const QpRebalanceVm *in = vm_input(vms, n_vms, c->id);
    const char *why = why_kept(c, in, o);
    if (why != NULL) {
      g_ptr_array_add(kept, g_strdup_printf("%s: %s", c->id, why));
      continue;
    }
    Vm v = {x, in, TRUE, FALSE};
    g_array_append_val(k->vms, v);
  }
}

void
qp_rebalance_free(QpRebalance *r)
{
  if (r == NULL)
    return;
  g_ptr_array_unref(r->moves);
  qp_claims_free(r->after);
  qp_plan_free(r->plan);
  g_ptr_array_unref(r->kept);
  g_free(r);
}

/* Goal (a) beside the request's room: its plan held as a claim. */
static gboolean
consolidate_beside(Work *k, const QpRebalanceOptions *o,
                   const QpPlacementOptions *popts, GError **error)
{
  QpPlan *plan = NULL;
  guint n = 0;
  if (o->req != NULL && !req_nodes(k, o->req, popts, &n, &plan, error))
    return FALSE;
  if (plan != NULL) {
    g_ptr_array_add(k->w->claims, qp_claim_from_plan(plan, REQ_ID, "request"));
    dedicated_changed(k);
    qp_plan_free(plan);
  }
  consolidate(k);
  if (plan != NULL)
    g_ptr_array_remove_index(k->w->claims, k->w->claims->len - 1);
  dedicated_changed(k);
  return TRUE;
}

QpRebalance *
qp_rebalance_compute(const QpHost *host, const QpClaims *claims,
                     const QpRebalanceVm *vms, guint n_vms,
                     const QpRebalanceOptions *o, GError **error)
{
  QpPlacementOptions defaults;
  qp_placement_options_init(&defaults);
  const QpPlacementOptions *popts = o->opts != NULL ? o->opts : &defaults;
  g_autoptr(QpRebalance) r = g_new0(QpRebalance, 1);
  r->kept = g_ptr_array_new_with_free_func(g_free);
  Work k = {0};
  work_init(&k, host, claims, vms, n_vms, o, popts, r->kept);
  r->spanning_before = count_spanning(&k);
  if (!o->no_consolidate)
    relieve(&k);
  gboolean ok = TRUE;
  if (o->req != NULL) {
    ok = req_nodes(&k, o->req, popts, &r->req_nodes_before, NULL, error) &&
         (r->req_nodes_before == 1 ||
          make_room(&k, o->req, popts, r->req_nodes_before, error));
  }
  if (ok && !o->no_consolidate)
    ok = consolidate_beside(&k, o, popts, error);
  if (ok && o->req != NULL)
    ok = req_nodes(&k, o->req, popts, &r->req_nodes_after, &r->plan, error);
  if (!ok) {
    work_clear(&k);
    qp_placement_options_clear(&defaults);
    return NULL;
  }
  r->spanning_after = count_spanning(&k);
  r->moves = g_steal_pointer(&k.moves);
  r->mib = moves_mib(r->moves);
  r->after = g_steal_pointer(&k.w);
  work_clear(&k);
  qp_placement_options_clear(&defaults);
  return g_steal_pointer(&r);
}
