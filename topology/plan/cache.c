/* Cache domains in the planner: cores that share an L3 (or an L2 shared by
 * several cores) share cache lines at cache speed; vCPUs of one VM spread
 * over several domains pay cross-domain traffic for every shared line. */
#include "topology/plan/cache.h"

#include "topology/plan/capacity.h"
#include "topology/host/cache-domains.h"
#include "topology/plan/result.h"

typedef struct {
  int domain;      /* index into host->domains, -1: a core of no domain */
  GArray *members; /* guint core indexes, free, in core order */
  gboolean whole;  /* every core of the domain is free */
  gboolean used;
} Group;

static void
group_clear(gpointer p)
{
  Group *g = p;
  g_array_unref(g->members);
}

/* The domain of core C at LEVEL, -1 if none (or a host built by hand
 * without domains). */
static int
domain_of(const QpHost *host, guint c, int level)
{
  int d = host->cores[c].domain[level];
  return d >= 0 && (guint)d < host->n_domains ? d : -1;
}

/* CANDS grouped by their domain at LEVEL, in order of first member. */
static GArray *
group_by_domain(const QpHost *host, const GArray *cands, int level)
{
  GArray *groups = g_array_new(FALSE, TRUE, sizeof(Group));
  g_array_set_clear_func(groups, group_clear);
  for (guint k = 0; k < cands->len; k++) {
    guint c = g_array_index(cands, guint, k);
    int d = domain_of(host, c, level);
    Group *g = NULL;
    for (guint x = 0; d >= 0 && x < groups->len && g == NULL; x++)
      if (g_array_index(groups, Group, x).domain == d)
        g = &g_array_index(groups, Group, x);
    if (g == NULL) {
      Group n = {.domain = d,
                 .members = g_array_new(FALSE, FALSE, sizeof(guint))};
      g_array_append_val(groups, n);
      g = &g_array_index(groups, Group, groups->len - 1);
    }
    g_array_append_val(g->members, c);
  }
  for (guint x = 0; x < groups->len; x++) {
    Group *g = &g_array_index(groups, Group, x);
    g->whole =
        g->domain < 0 || g->members->len == host->domains[g->domain].n_cores;
  }
  return groups;
}

/* Better than B for the rest of NEED cores: holding them all beats not;
 * among those that hold them the fewer free cores (best fit), among those
 * that do not the more; a wholly free domain on a tie. */
static gboolean
better_group(const Group *g, const Group *b, guint need)
{
  if (b == NULL)
    return TRUE;
  gboolean gh = g->members->len >= need, bh = b->members->len >= need;
  if (gh != bh)
    return gh;
  if (g->members->len != b->members->len)
    return gh ? g->members->len < b->members->len
              : g->members->len > b->members->len;
  return g->whole && !b->whole;
}

/* Appends to OUT the NEED cores of CANDS that fill the fewest domains of
 * LEVEL, and of the levels below inside each. */
static void
select_cores(const QpHost *host, const GArray *cands, guint need, int level,
             GArray *out)
{
  if (need >= cands->len || level >= QP_CACHE_LEVELS) {
    g_array_append_vals(out, cands->data, MIN(need, cands->len));
    return;
  }
  g_autoptr(GArray) groups = group_by_domain(host, cands, level);
  if (groups->len == 1) {
    select_cores(host, cands, need, level + 1, out);
    return;
  }
  while (need > 0) {
    Group *best = NULL;
    for (guint x = 0; x < groups->len; x++) {
      Group *g = &g_array_index(groups, Group, x);
      if (!g->used && better_group(g, best, need))
        best = g;
    }
    if (best == NULL)
      return;
    guint take = MIN(need, best->members->len);
    select_cores(host, best->members, take, level + 1, out);
    best->used = TRUE;
    need -= take;
  }
}

static gboolean
core_free(const Ctx *ctx, const Attempt *a, CapKind cap, guint i, guint c)
{
  if (a->core_used[c])
    return FALSE;
  g_auto(hwloc_bitmap_t) pus = hwloc_bitmap_alloc();
  hwloc_bitmap_and(pus, ctx->host->cores[c].pus, a->node_cpus[i]);
  guint w = (guint)MAX(hwloc_bitmap_weight(pus), 0);
  return w >= (cap == CAP_GROUPS ? ctx->threads : 1);
}

/* The cores of node index I free under CAP, in core order. */
static GArray *
free_cores(const Ctx *ctx, const Attempt *a, CapKind cap, guint i)
{
  const GArray *all = a->node_cores[i];
  GArray *cands = g_array_new(FALSE, FALSE, sizeof(guint));
  for (guint k = 0; k < all->len; k++) {
    guint c = g_array_index(all, guint, k);
    if (core_free(ctx, a, cap, i, c))
      g_array_append_val(cands, c);
  }
  return cands;
}

GArray *
qp_plan_cache_order_cores(const Ctx *ctx, const Attempt *a, CapKind cap,
                          guint i, guint need)
{
  const GArray *all = a->node_cores[i];
  g_autoptr(GArray) cands = free_cores(ctx, a, cap, i);
  GArray *order = g_array_new(FALSE, FALSE, sizeof(guint));
  select_cores(ctx->host, cands, need, QP_CACHE_L3, order);
  /* Then every other core of the node, in core order. */
  for (guint k = 0; k < all->len; k++) {
    guint c = g_array_index(all, guint, k);
    gboolean in = FALSE;
    for (guint x = 0; x < order->len && !in; x++)
      in = g_array_index(order, guint, x) == c;
    if (!in)
      g_array_append_val(order, c);
  }
  return order;
}

/* Free cores of node index I under CAP, grouped by L3 domain. */
static GArray *
free_groups(const Ctx *ctx, const Attempt *a, CapKind cap, guint i)
{
  g_autoptr(GArray) cands = free_cores(ctx, a, cap, i);
  return group_by_domain(ctx->host, cands, QP_CACHE_L3);
}

/* Takes NEED cores from the groups of the K nodes in GROUPS the way
 * select_cores() does, adding to TAKE[j] per node; returns the number of
 * groups used. The groups' used marks are reset after. */
static guint
pick_groups(GArray **groups, guint k, guint need, guint64 *take)
{
  guint used = 0;
  while (need > 0) {
    Group *best = NULL;
    guint best_j = 0;
    for (guint j = 0; j < k; j++)
      for (guint x = 0; x < groups[j]->len; x++) {
        Group *g = &g_array_index(groups[j], Group, x);
        if (!g->used && better_group(g, best, need)) {
          best = g;
          best_j = j;
        }
      }
    if (best == NULL)
      break;
    guint n = MIN(need, best->members->len);
    best->used = TRUE;
    take[best_j] += n;
    need -= n;
    used++;
  }
  for (guint j = 0; j < k; j++)
    for (guint x = 0; x < groups[j]->len; x++)
      g_array_index(groups[j], Group, x).used = FALSE;
  return used;
}

void
qp_plan_cache_split_units(const Ctx *ctx, const Attempt *a, CapKind cap,
                          const guint *nodes, guint k, guint64 *count)
{
  if (cap == CAP_PUS || k < 2 || ctx->host->n_domains == 0)
    return;
  g_autofree GArray **groups = g_new0(GArray *, k);
  g_autofree guint64 *mine = g_new0(guint64, k);
  g_autofree guint64 *scratch = g_new0(guint64, 1);
  guint even = 0, units = 0, old_nodes = 0, new_nodes = 0;
  for (guint j = 0; j < k; j++) {
    groups[j] = free_groups(ctx, a, cap, nodes[j]);
    even += pick_groups(&groups[j], 1, (guint)count[nodes[j]], scratch);
    units += (guint)count[nodes[j]];
    old_nodes += count[nodes[j]] > 0;
  }
  guint fewer = pick_groups(groups, k, units, mine);
  guint64 placed = 0;
  for (guint j = 0; j < k; j++) {
    new_nodes += mine[j] > 0;
    placed += mine[j];
  }
  if (fewer < even && new_nodes == old_nodes && placed == units)
    for (guint j = 0; j < k; j++)
      count[nodes[j]] = mine[j];
  for (guint j = 0; j < k; j++)
    g_array_unref(groups[j]);
}

/* Shared vCPUs per CPU (by host->cpus index): other VMs' from the ledger,
 * and this plan's vCPUs placed so far, each spread over its CPUs. */
static double *
shared_load(const Ctx *ctx, const QpPlan *plan)
{
  double *load = qp_claims_cpu_load(ctx->host, ctx->claims);
  for (guint v = 0; v < plan->n_vcpus; v++) {
    hwloc_const_bitmap_t set = plan->vcpu_cpus[v];
    int w = set != NULL ? hwloc_bitmap_weight(set) : 0;
    int id;
    if (w <= 0)
      continue;
    hwloc_bitmap_foreach_begin(id, set)
    {
      int ci = qp_plan_cpu_index(ctx, id);
      if (ci >= 0)
        load[ci] += 1.0 / w;
    }
    hwloc_bitmap_foreach_end();
  }
  return load;
}

/* Usable cores of domain D in A on node index I. */
static guint
usable_cores(const Ctx *ctx, const Attempt *a, guint i, guint d)
{
  const QpHost *host = ctx->host;
  guint n = 0;
  for (guint c = 0; c < host->n_cores; c++)
    n += hwloc_bitmap_isincluded(host->cores[c].pus, host->domains[d].cpus) &&
         hwloc_bitmap_intersects(host->cores[c].pus, a->node_cpus[i]);
  return n;
}

hwloc_bitmap_t
qp_plan_cache_float_cpus(QpPlan *plan, const Ctx *ctx, const Attempt *a,
                         guint i, guint n, const char *who)
{
  const QpHost *host = ctx->host;
  if (host->n_domains == 0 || n == 0)
    return NULL;
  g_autofree double *load = shared_load(ctx, plan);
  g_auto(hwloc_bitmap_t) cpus = hwloc_bitmap_alloc();
  int best = -1;
  double best_per_cpu = 0;
  guint best_cpus = 0;
  for (guint d = 0; d < host->n_domains; d++) {
    const QpCacheDomain *cd = &host->domains[d];
    if (cd->level != QP_CACHE_L3 || cd->node != host->nodes[i].id ||
        usable_cores(ctx, a, i, d) < n)
      continue;
    hwloc_bitmap_and(cpus, cd->cpus, a->node_cpus[i]);
    if (hwloc_bitmap_isequal(cpus, a->node_cpus[i]))
      continue; /* the whole node: nothing to narrow */
    guint w = (guint)hwloc_bitmap_weight(cpus);
    double sum = n;
    int id;
    hwloc_bitmap_foreach_begin(id, cpus)
    {
      int ci = qp_plan_cpu_index(ctx, id);
      sum += ci >= 0 ? load[ci] : 0;
    }
    hwloc_bitmap_foreach_end();
    /* Busier than one vCPU per CPU with this VM: not a home for it. */
    if (sum > w + 1e-9)
      continue;
    double per_cpu = sum / w;
    if (best < 0 || per_cpu < best_per_cpu - 1e-9 ||
        (per_cpu < best_per_cpu + 1e-9 && w < best_cpus)) {
      best = (int)d;
      best_per_cpu = per_cpu;
      best_cpus = w;
    }
  }
  if (best < 0)
    return NULL;
  hwloc_bitmap_t out = hwloc_bitmap_alloc();
  hwloc_bitmap_and(out, host->domains[best].cpus, a->node_cpus[i]);
  g_autofree char *l = qp_list_format(out);
  qp_plan_add_reason(
      plan,
      "%s%s%u vCPU%s float over %s %s of host node %d: the "
      "least-loaded cache domain that holds them (%.2f vCPUs per "
      "CPU with this VM)",
      who, *who ? ": " : "", n, n == 1 ? "" : "s",
      qp_cache_level_name(host->domains[best].level), l, host->nodes[i].id,
      best_per_cpu);
  return out;
}

/* The L3 domain vCPU V of PLAN runs in, -1 if none or several. */
static int
vcpu_l3(const QpPlan *plan, const QpHost *host, guint v)
{
  hwloc_const_bitmap_t set = plan->vcpu_cpus[v];
  for (guint d = 0; set != NULL && d < host->n_domains; d++)
    if (host->domains[d].level == QP_CACHE_L3 &&
        hwloc_bitmap_isincluded(set, host->domains[d].cpus))
      return (int)d;
  return -1;
}

/* Runs of one L3 in the vCPUs FIRST..FIRST+SOCKET-1 of PLAN: their number
 * when every run is as long and in an L3 of its own, else 0. */
static guint
socket_runs(const QpPlan *plan, const QpHost *host, guint first, guint socket)
{
  g_autofree int *dom = g_new(int, socket);
  g_autofree guint *len = g_new0(guint, socket);
  guint runs = 0;
  for (guint v = first; v < first + socket; v++) {
    int d = vcpu_l3(plan, host, v);
    if (d < 0)
      return 0;
    if (runs == 0 || dom[runs - 1] != d) {
      for (guint r = 0; r < runs; r++)
        if (dom[r] == d)
          return 0; /* the L3 comes back: not one run */
      dom[runs++] = d;
    }
    len[runs - 1]++;
  }
  for (guint r = 1; r < runs; r++)
    if (len[r] != len[0])
      return 0;
  return runs;
}

guint
qp_plan_cache_guest_dies(const QpPlan *plan, const QpHost *host, guint sockets,
                         guint socket, guint threads)
{
  if (host->n_domains == 0 || sockets * socket != plan->n_vcpus)
    return 1;
  guint dies = 0;
  for (guint s = 0; s < sockets; s++) {
    guint runs = socket_runs(plan, host, s * socket, socket);
    if (runs == 0 || (dies != 0 && runs != dies))
      return 1;
    dies = runs;
  }
  if (dies < 2 || socket % dies != 0 || (socket / dies) % threads != 0)
    return 1;
  return dies;
}
