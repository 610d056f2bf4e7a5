/* simulate: placement quality of qemu-pin's planner against the placers of
 * Incus, Xen libxl, Proxmox and plain first fit, in boot storms.
 *
 * A storm is a list of VMs drawn from a seeded distribution (vCPUs in
 * {2,4,8,16} weighted 4:4:3:1, 1, 2 or 4 GiB per vCPU, so 2-64 GiB) asking
 * for 150% of the host's memory. Each placer starts from an empty host and
 * tries every VM of the list in order; a VM it cannot place is refused and
 * the storm goes on. Reported per placer: VMs placed on one node, VMs that
 * span nodes, VMs whose vCPUs run inside one L3 cache domain (a baseline
 * pins to its nodes' CPUs: inside one L3 only when they are), VMs refused,
 * and the memory left stranded at the end (the list
 * asked for more than the host holds, so memory left is memory no remaining
 * VM of the list could use where it was).
 *
 * qemu-pin is the real planner (qp_plan_compute, mode balanced, strategy
 * spread or pack) with its claims accumulating as the ledger's would.
 *
 * Usage: simulate [--seeds N] [--first-seed S] [--markdown] [--per-seed]
 *                 [--topologies DIR] [--host TEXT] [--timing] [--trace] */
#include <glib.h>
#include <stdio.h>
#include <string.h>

#include "bench/sim-baselines.h"
#include "bench/sim-churn.h"
#include "bench/sim-qp-placer.h"
#include "topology/host/host.h"
#include "topology/ledger/ledger.h"
#include "topology/plan/claim.h"
#include "topology/plan/plan.h"

#ifndef QP_TOPOLOGY_DIR
#define QP_TOPOLOGY_DIR "tests/data/topologies"
#endif

enum { STRAT_SPREAD, STRAT_PACK, STRAT_BASE0 };
#define N_STRATS (STRAT_BASE0 + SIM_N_BASELINES)
/* The placers that move running VMs, after the others in every table. */
#define STRAT_REBALANCE N_STRATS
#define STRAT_NUMAD (N_STRATS + 1)
#define N_ALL (N_STRATS + 2)

typedef struct {
  guint placed, local, spanned, refused;
  guint one_l3; /* VMs whose vCPUs run inside one L3 domain */
  guint64 stranded_mib, placed_mib;
} Result;

static int opt_seeds = 10;
static int opt_first_seed = 1;
static gboolean opt_markdown;
static gboolean opt_per_seed;
static char *opt_topologies;
static gboolean opt_trace;
static gboolean opt_timing;
static char *opt_host;
static int opt_churn_seeds = 5;
static double opt_churn_hours = 500;
static double opt_churn_life = 10;
static double opt_churn_load = 0.9;
static double opt_churn_period = 1;
static int opt_cooldown = 3600;

static const GOptionEntry entries[] = {
    {"seeds", 0, 0, G_OPTION_ARG_INT, &opt_seeds, "Storms per host (10)", "N"},
    {"first-seed", 0, 0, G_OPTION_ARG_INT, &opt_first_seed, "First seed (1)",
     "S"},
    {"markdown", 0, 0, G_OPTION_ARG_NONE, &opt_markdown, "Markdown tables",
     NULL},
    {"per-seed", 0, 0, G_OPTION_ARG_NONE, &opt_per_seed,
     "One line per storm as well", NULL},
    {"topologies", 0, 0, G_OPTION_ARG_FILENAME, &opt_topologies,
     "Directory of the recorded hosts", "DIR"},
    {"host", 0, 0, G_OPTION_ARG_STRING, &opt_host,
     "Only the hosts whose label contains TEXT", "TEXT"},
    {"timing", 0, 0, G_OPTION_ARG_NONE, &opt_timing,
     "Time the rebalance planner's calls (a table per host)", NULL},
    {"trace", 0, 0, G_OPTION_ARG_NONE, &opt_trace,
     "Print every VM's placement and every move (on stderr)", NULL},
    {"churn-seeds", 0, 0, G_OPTION_ARG_INT, &opt_churn_seeds,
     "Churn runs per host (5; 0: none)", "N"},
    {"churn-hours", 0, 0, G_OPTION_ARG_DOUBLE, &opt_churn_hours,
     "Simulated hours of a churn run (500)", "H"},
    {"churn-life", 0, 0, G_OPTION_ARG_DOUBLE, &opt_churn_life,
     "Mean VM lifetime in hours (10)", "H"},
    {"churn-load", 0, 0, G_OPTION_ARG_DOUBLE, &opt_churn_load,
     "Memory asked for by live VMs / host memory, on average (0.9)", "F"},
    {"churn-period", 0, 0, G_OPTION_ARG_DOUBLE, &opt_churn_period,
     "Hours between the movers' periodic passes (1)", "H"},
    {"cooldown", 0, 0, G_OPTION_ARG_INT, &opt_cooldown,
     "Seconds a moved VM stays before it may move again (3600)", "S"},
    {NULL},
};

static const char *
strat_name(guint s)
{
  switch (s) {
  case STRAT_SPREAD:
    return "qemu-pin spread";
  case STRAT_PACK:
    return "qemu-pin pack";
  case STRAT_REBALANCE:
    return "qemu-pin spread+rebalance";
  case STRAT_NUMAD:
    return "numad-like";
  default:
    return sim_baseline_name((SimBaseline)(s - STRAT_BASE0));
  }
}

/* The storm of SEED for a host of TOTAL_MIB. */
static GArray *
make_storm(guint32 seed, guint64 total_mib)
{
  static const guint vcpus[] = {2, 2, 2, 2, 4, 4, 4, 4, 8, 8, 8, 16};
  static const guint gib_per_vcpu[] = {1, 2, 4};
  g_autoptr(GRand) r = g_rand_new_with_seed(seed);
  GArray *vms = g_array_new(FALSE, FALSE, sizeof(SimVm));
  guint64 sum = 0;
  while (sum < total_mib * 3 / 2) {
    SimVm vm;
    vm.vcpus = vcpus[g_rand_int_range(r, 0, G_N_ELEMENTS(vcpus))];
    vm.mem_mib =
        (guint64)vm.vcpus *
        gib_per_vcpu[g_rand_int_range(r, 0, G_N_ELEMENTS(gib_per_vcpu))] * 1024;
    g_array_append_val(vms, vm);
    sum += vm.mem_mib;
  }
  return vms;
}

/* The empty host as the planner sees it: memory outside hugepage pools,
 * usable CPUs per node. */
static SimState *
state_of_host(const QpHost *host)
{
  SimState *s = sim_state_new(host->n_nodes);
  for (guint i = 0; i < host->n_nodes; i++) {
    const QpNode *node = &host->nodes[i];
    guint64 pools = 0;
    if (node->hugepages != NULL)
      for (guint k = 0; k < node->hugepages->len; k++) {
        const QpHugePool *p = &g_array_index(node->hugepages, QpHugePool, k);
        pools += p->total * p->page_kib / 1024;
      }
    s->id[i] = node->id;
    s->total_mib[i] = node->total_mib > pools ? node->total_mib - pools : 0;
    s->free_mib[i] = s->total_mib[i];
    s->cpus[i] =
        node->cpus != NULL ? (guint)hwloc_bitmap_weight(node->cpus) : 0;
  }
  return s;
}

static void
trace(const char *who, guint v, const SimVm *vm, const SimState *s,
      const guint *nodes, const guint64 *amounts, guint k)
{
  if (!opt_trace)
    return;
  g_autoptr(GString) t = g_string_new(NULL);
  for (guint j = 0; j < k; j++)
    g_string_append_printf(t, " %d:%" G_GUINT64_FORMAT, s->id[nodes[j]],
                           amounts[j] / 1024);
  g_autoptr(GString) f = g_string_new(NULL);
  for (guint i = 0; i < s->n; i++)
    g_string_append_printf(f, " %.1f", (double)s->free_mib[i] / 1024);
  g_printerr("%-18s vm%-3u %2u vCPUs %2" G_GUINT64_FORMAT " GiB ->%s%s; "
             "free after:%s\n",
             who, v, vm->vcpus, vm->mem_mib / 1024, k ? "" : " refused", t->str,
             f->str);
}

/* SET lies inside one L3 cache domain of HOST. */
static gboolean
in_one_l3(const QpHost *host, hwloc_const_bitmap_t set)
{
  for (guint d = 0; d < host->n_domains; d++)
    if (host->domains[d].level == QP_CACHE_L3 && !hwloc_bitmap_iszero(set) &&
        hwloc_bitmap_isincluded(set, host->domains[d].cpus))
      return TRUE;
  return FALSE;
}

/* Baselines pin a VM to its nodes' CPUs: inside one L3 only when those
 * are. */
static gboolean
nodes_in_one_l3(const QpHost *host, const guint *nodes, guint k)
{
  g_auto(hwloc_bitmap_t) cpus = hwloc_bitmap_alloc();
  for (guint j = 0; j < k; j++)
    hwloc_bitmap_or(cpus, cpus, host->nodes[nodes[j]].cpus);
  return in_one_l3(host, cpus);
}

static void
account(Result *r, const SimState *s, const SimVm *vm, guint k, gboolean one_l3)
{
  r->placed++;
  r->one_l3 += one_l3;
  r->placed_mib += vm->mem_mib;
  if (k == 1)
    r->local++;
  else
    r->spanned++;
  (void)s;
}

static void
finish(Result *r, const SimState *s, guint n_vms)
{
  r->refused = n_vms - r->placed;
  r->stranded_mib = 0;
  for (guint i = 0; i < s->n; i++)
    r->stranded_mib += s->free_mib[i];
}

static gboolean
run_planner(const QpHost *host, const GArray *vms, QpStrategy strategy,
            Result *r, GError **error)
{
  g_autoptr(SimState) s = state_of_host(host);
  g_autoptr(QpClaims) claims = qp_claims_new();
  QpPlacementOptions opts;
  qp_placement_options_init(&opts);
  opts.mode = QP_MODE_BALANCED;
  opts.strategy = strategy;
  g_autofree guint *nodes = g_new(guint, MAX(host->n_nodes, 1));
  g_autofree guint64 *amounts = g_new(guint64, MAX(host->n_nodes, 1));
  memset(r, 0, sizeof(*r));
  for (guint v = 0; v < vms->len; v++) {
    const SimVm *vm = &g_array_index(vms, SimVm, v);
    g_autoptr(QpRequest) req = qp_request_new();
    req->vcpus = req->maxcpus = vm->vcpus;
    req->cores = vm->vcpus;
    req->mem_mib = vm->mem_mib;
    g_autoptr(GError) err = NULL;
    g_autoptr(QpPlan) plan = qp_plan_compute(host, claims, req, &opts, &err);
    if (plan == NULL) {
      if (g_error_matches(err, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT)) {
        trace(strategy == QP_STRATEGY_PACK ? "qemu-pin pack"
                                           : "qemu-pin spread",
              v, vm, s, nodes, amounts, 0);
        continue;
      }
      g_propagate_error(error, g_steal_pointer(&err));
      return FALSE;
    }
    /* The VM's nodes: where its memory and its vCPUs went. */
    guint k = 0;
    g_autofree gboolean *in = g_new0(gboolean, MAX(host->n_nodes, 1));
    g_autofree guint64 *mem = g_new0(guint64, MAX(host->n_nodes, 1));
    for (guint x = 0; plan->claim_mem != NULL && x < plan->claim_mem->len;
         x++) {
      const QpNodeAmount *m = &g_array_index(plan->claim_mem, QpNodeAmount, x);
      int i = qp_host_node_index(host, m->node);
      if (i >= 0 && m->mib > 0) {
        in[i] = TRUE;
        mem[i] += m->mib;
      }
    }
    for (guint x = 0; plan->load != NULL && x < plan->load->len; x++) {
      const QpNodeLoad *l = &g_array_index(plan->load, QpNodeLoad, x);
      int i = qp_host_node_index(host, l->node);
      if (i >= 0 && l->vcpus > 0)
        in[i] = TRUE;
    }
    for (guint i = 0; i < host->n_nodes; i++)
      if (in[i]) {
        nodes[k] = i;
        amounts[k] = mem[i];
        k++;
      }
    sim_commit(s, vm, nodes, k, amounts);
    trace(strategy == QP_STRATEGY_PACK ? "qemu-pin pack" : "qemu-pin spread", v,
          vm, s, nodes, amounts, k);
    g_auto(hwloc_bitmap_t) vcpu_cpus = hwloc_bitmap_alloc();
    for (guint x = 0; x < plan->n_vcpus; x++)
      if (plan->vcpu_cpus[x] != NULL)
        hwloc_bitmap_or(vcpu_cpus, vcpu_cpus, plan->vcpu_cpus[x]);
    account(r, s, vm, k, in_one_l3(host, vcpu_cpus));
    g_autofree char *id = g_strdup_printf("vm%u", v);
    QpClaim *c = qp_claim_from_plan(plan, id, id);
    g_ptr_array_add(claims->claims, c);
  }
  finish(r, s, vms->len);
  qp_placement_options_clear(&opts);
  return TRUE;
}

static void
run_baseline(const QpHost *host, const GArray *vms, SimBaseline b, Result *r)
{
  g_autoptr(SimState) s = state_of_host(host);
  g_autofree guint *nodes = g_new(guint, MAX(host->n_nodes, 1));
  g_autofree guint64 *amounts = g_new(guint64, MAX(host->n_nodes, 1));
  memset(r, 0, sizeof(*r));
  for (guint v = 0; v < vms->len; v++) {
    const SimVm *vm = &g_array_index(vms, SimVm, v);
    guint k = 0;
    if (!sim_baseline_place(s, vm, b, nodes, &k)) {
      trace(sim_baseline_name(b), v, vm, s, nodes, amounts, 0);
      continue;
    }
    sim_split(s, vm, nodes, k, amounts);
    sim_commit(s, vm, nodes, k, amounts);
    trace(sim_baseline_name(b), v, vm, s, nodes, amounts, k);
    account(r, s, vm, k, nodes_in_one_l3(host, nodes, k));
  }
  finish(r, s, vms->len);
}

/* A storm for the placers that move running VMs: launches one after the
 * other (a minute apart, for the cooldown), numad's pass after each; the
 * VMs are counted where they are at the end. */
static gboolean
run_mover_storm(const QpHost *host, const GArray *vms, guint which, Result *r,
                GArray *times, GError **error)
{
  g_autoptr(SimState) empty = state_of_host(host);
  g_autoptr(SimQpPlacer) qp = NULL;
  g_autoptr(SimStatePlacer) sp = NULL;
  SimPlacer pl;
  if (which == STRAT_REBALANCE) {
    qp = sim_qp_placer_new(host, QP_STRATEGY_SPREAD, TRUE, opt_cooldown,
                           vms->len);
    sim_qp_placer_set_trace(qp, opt_trace);
    sim_qp_placer_bind(qp, &pl);
  } else {
    sp = sim_state_placer_new(sim_state_copy(empty), SIM_PROXMOX,
                              SIM_MOVER_NUMAD, vms->len);
    sim_state_placer_bind(sp, &pl);
  }
  g_autofree gboolean *placed = g_new0(gboolean, MAX(vms->len, 1));
  memset(r, 0, sizeof(*r));
  for (guint v = 0; v < vms->len; v++) {
    const SimVm *vm = &g_array_index(vms, SimVm, v);
    placed[v] = pl.place(pl.data, v, vm, (double)v / 60);
    if (sp != NULL)
      sim_state_placer_tick(sp);
  }
  if (qp != NULL && sim_qp_placer_error(qp) != NULL) {
    g_propagate_error(error, g_error_copy(sim_qp_placer_error(qp)));
    return FALSE;
  }
  if (qp != NULL) {
    const GArray *t = sim_qp_placer_times(qp);
    g_array_append_vals(times, t->data, t->len);
  }
  for (guint v = 0; v < vms->len; v++) {
    if (!placed[v])
      continue;
    const SimVm *vm = &g_array_index(vms, SimVm, v);
    gboolean one_l3;
    if (qp != NULL) {
      one_l3 = sim_qp_placer_one_l3(qp, v);
    } else {
      guint k;
      const guint *nodes = sim_state_placer_nodes(sp, v, &k);
      one_l3 = nodes_in_one_l3(host, nodes, k);
    }
    account(r, empty, vm, pl.nodes(pl.data, v), one_l3);
  }
  r->refused = vms->len - r->placed;
  if (qp != NULL) {
    r->stranded_mib = sim_qp_placer_free_mib(qp);
  } else {
    const SimState *s = sim_state_placer_state(sp);
    for (guint i = 0; i < s->n; i++)
      r->stranded_mib += s->free_mib[i];
  }
  return TRUE;
}

/* SLIT for the synthetic host: 10 local, 16 same package, 32 across. */
static void
set_distances(QpHost *host)
{
  guint nn = host->n_nodes;
  g_autofree guint *m = g_new(guint, nn * nn);
  g_autofree int *pkg = g_new(int, nn);
  for (guint a = 0; a < nn; a++) {
    pkg[a] = -1;
    for (guint c = 0; c < host->n_cpus && pkg[a] < 0; c++)
      if (host->cpus[c].node == host->nodes[a].id)
        pkg[a] = host->cpus[c].package;
  }
  for (guint a = 0; a < nn; a++)
    for (guint b = 0; b < nn; b++)
      m[a * nn + b] = a == b ? 10 : pkg[a] == pkg[b] ? 16 : 32;
  qp_host_set_distances(host, m);
}

static void
print_header(const char *label, const QpHost *host, guint64 total_mib)
{
  if (opt_markdown) {
    printf("\n### %s\n\n%u nodes, %u CPUs, %" G_GUINT64_FORMAT " GiB; seeds "
           "%d-%d, sums over the storms.\n\n",
           label, host->n_nodes, host->n_cpus, total_mib / 1024, opt_first_seed,
           opt_first_seed + opt_seeds - 1);
    printf("| placer | VMs placed | GiB placed | node-local | spanning | "
           "one L3 | refused | stranded GiB |\n"
           "|---|---:|---:|---:|---:|---:|---:|---:|\n");
  } else {
    printf("\n# %s: %u nodes, %u CPUs, %" G_GUINT64_FORMAT " GiB; seeds "
           "%d-%d (sums)\n",
           label, host->n_nodes, host->n_cpus, total_mib / 1024, opt_first_seed,
           opt_first_seed + opt_seeds - 1);
    printf("%-18s %7s %10s %10s %8s %7s %7s %13s\n", "placer", "placed",
           "GiB placed", "node-local", "spanning", "one L3", "refused",
           "stranded GiB");
  }
}

static void
print_row(const char *name, const Result *r)
{
  if (opt_markdown)
    printf("| %s | %u | %.0f | %u | %u | %u | %u | %.1f |\n", name, r->placed,
           (double)r->placed_mib / 1024, r->local, r->spanned, r->one_l3,
           r->refused, (double)r->stranded_mib / 1024);
  else
    printf("%-18s %7u %10.0f %10u %8u %7u %7u %13.1f\n", name, r->placed,
           (double)r->placed_mib / 1024, r->local, r->spanned, r->one_l3,
           r->refused, (double)r->stranded_mib / 1024);
}

/* A does better than B: at least as many VMs node-local and as much
 * memory placed, and more of one of them. (VMs placed alone would reward a
 * placer that refuses big VMs and fits more small ones.) */
static gboolean
dominates(const Result *a, const Result *b)
{
  return a->local >= b->local && a->placed_mib >= b->placed_mib &&
         (a->local > b->local || a->placed_mib > b->placed_mib);
}

static void
add_finding(GPtrArray *findings, const char *label, int seed, guint s,
            const Result *rs, guint b, const Result *rb)
{
  g_ptr_array_add(
      findings,
      g_strdup_printf(
          "%s, seed %d: %s places %u VMs, %.0f GiB "
          "(%u node-local, %u spanning, %u refused, "
          "%.1f GiB stranded); %s places %u, %.0f "
          "GiB (%u node-local, %u spanning, %u "
          "refused, %.1f GiB stranded)",
          label, seed, strat_name(s), rs->placed, (double)rs->placed_mib / 1024,
          rs->local, rs->spanned, rs->refused, (double)rs->stranded_mib / 1024,
          strat_name(b), rb->placed, (double)rb->placed_mib / 1024, rb->local,
          rb->spanned, rb->refused, (double)rb->stranded_mib / 1024));
}

/* What the verdicts need of one host: storm sums, churn sums, and the
 * runs where a baseline has more node-local VMs (VM-hours under churn)
 * than spread + rebalance. */
typedef struct {
  char *label;
  guint n_nodes;
  guint64 total_mib;
  Result storm[N_ALL];
  SimChurnResult churn[N_ALL];
  GPtrArray *behind; /* of char* */
  GArray *times;     /* of SimQpTime: spread + rebalance's planner calls */
} HostSum;

static void
host_sum_free(gpointer p)
{
  HostSum *h = p;
  g_free(h->label);
  g_ptr_array_unref(h->behind);
  g_array_unref(h->times);
  g_free(h);
}

static gboolean
is_baseline(guint s)
{
  return (s >= STRAT_BASE0 && s < N_STRATS) || s == STRAT_NUMAD;
}

static gboolean
run_storms(const char *label, QpHost *host, guint64 total, GPtrArray *findings,
           HostSum *hs, GError **error)
{
  Result *sum = hs->storm;
  g_autoptr(GString) per_seed = g_string_new("");

  for (int seed = opt_first_seed; seed < opt_first_seed + opt_seeds; seed++) {
    g_autoptr(GArray) vms = make_storm((guint32)seed, total);
    Result r[N_ALL];
    if (!run_planner(host, vms, QP_STRATEGY_SPREAD, &r[STRAT_SPREAD], error) ||
        !run_planner(host, vms, QP_STRATEGY_PACK, &r[STRAT_PACK], error) ||
        !run_mover_storm(host, vms, STRAT_REBALANCE, &r[STRAT_REBALANCE],
                         hs->times, error) ||
        !run_mover_storm(host, vms, STRAT_NUMAD, &r[STRAT_NUMAD], hs->times,
                         error))
      return FALSE;
    for (guint b = 0; b < SIM_N_BASELINES; b++)
      run_baseline(host, vms, (SimBaseline)b, &r[STRAT_BASE0 + b]);
    for (guint s = 0; s < N_ALL; s++) {
      sum[s].placed += r[s].placed;
      sum[s].local += r[s].local;
      sum[s].spanned += r[s].spanned;
      sum[s].one_l3 += r[s].one_l3;
      sum[s].refused += r[s].refused;
      sum[s].stranded_mib += r[s].stranded_mib;
      sum[s].placed_mib += r[s].placed_mib;
      if (opt_per_seed)
        g_string_append_printf(per_seed,
                               "%s seed %d (%u VMs): %-18s placed %u, local "
                               "%u, spanning %u, refused %u, stranded %.1f "
                               "GiB\n",
                               label, seed, vms->len, strat_name(s),
                               r[s].placed, r[s].local, r[s].spanned,
                               r[s].refused, (double)r[s].stranded_mib / 1024);
    }
    /* Where a baseline does better, say exactly where: at least as many
     * VMs node-local and as much memory placed, and more of one. */
    for (guint s = STRAT_SPREAD; s <= STRAT_PACK; s++)
      for (guint b = STRAT_BASE0; b < N_STRATS; b++)
        if (dominates(&r[b], &r[s]))
          add_finding(findings, label, seed, s, &r[s], b, &r[b]);
    for (guint b = 0; b < N_ALL; b++)
      if (is_baseline(b) && r[b].local > r[STRAT_REBALANCE].local)
        g_ptr_array_add(
            hs->behind,
            g_strdup_printf("%s, storm seed %d: %s %u node-local VMs, %.0f "
                            "GiB placed; qemu-pin spread+rebalance %u, %.0f "
                            "GiB",
                            label, seed, strat_name(b), r[b].local,
                            (double)r[b].placed_mib / 1024,
                            r[STRAT_REBALANCE].local,
                            (double)r[STRAT_REBALANCE].placed_mib / 1024));
  }
  print_header(label, host, total);
  for (guint s = 0; s < N_ALL; s++)
    print_row(strat_name(s), &sum[s]);
  if (opt_per_seed)
    printf("\n%s", per_seed->str);
  return TRUE;
}

/* One churn run of placer S. */
static gboolean
run_churn_one(QpHost *host, const GArray *arr, const SimChurnParams *p, guint s,
              SimChurnResult *r, GArray *times, GError **error)
{
  g_autoptr(SimQpPlacer) qp = NULL;
  g_autoptr(SimStatePlacer) sp = NULL;
  SimPlacer pl;
  if (s == STRAT_SPREAD || s == STRAT_PACK || s == STRAT_REBALANCE) {
    qp = sim_qp_placer_new(
        host, s == STRAT_PACK ? QP_STRATEGY_PACK : QP_STRATEGY_SPREAD,
        s == STRAT_REBALANCE, opt_cooldown, arr->len);
    sim_qp_placer_set_trace(qp, opt_trace && s == STRAT_REBALANCE);
    sim_qp_placer_bind(qp, &pl);
  } else {
    sp = sim_state_placer_new(
        state_of_host(host),
        s == STRAT_NUMAD ? SIM_PROXMOX : (SimBaseline)(s - STRAT_BASE0),
        s == STRAT_NUMAD ? SIM_MOVER_NUMAD : SIM_MOVER_NONE, arr->len);
    sim_state_placer_bind(sp, &pl);
  }
  sim_churn_run(arr, p, &pl, r);
  if (qp != NULL && sim_qp_placer_error(qp) != NULL) {
    g_propagate_error(error, g_error_copy(sim_qp_placer_error(qp)));
    return FALSE;
  }
  if (s == STRAT_REBALANCE) {
    const GArray *t = sim_qp_placer_times(qp);
    g_array_append_vals(times, t->data, t->len);
  }
  return TRUE;
}

static void
print_churn(const HostSum *hs)
{
  printf("\n### %s: churn\n\n%u nodes, %" G_GUINT64_FORMAT
         " GiB; seeds %d-%d, sums over the runs.\n\n",
         hs->label, hs->n_nodes, hs->total_mib / 1024, opt_first_seed,
         opt_first_seed + opt_churn_seeds - 1);
  printf("| placer | VMs arrived | VMs placed | refused | node-local VM-h | "
         "spanning VM-h | node-local share | moves | GiB moved | MiB moved "
         "per placed VM | VM-h one node could hold | node-local VM-h at "
         "most, together |\n"
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (guint s = 0; s < N_ALL; s++) {
    const SimChurnResult *c = &hs->churn[s];
    double all = c->local_h + c->spanning_h;
    printf("| %s | %u | %u | %u | %.0f | %.0f | %.1f%% | %u | %.1f | %.0f | "
           "%.0f | %.0f |\n",
           strat_name(s), c->arrivals, c->placed, c->refused, c->local_h,
           c->spanning_h, all > 0 ? 100 * c->local_h / all : 0, c->moves,
           (double)c->moved_mib / 1024,
           c->placed ? (double)c->moved_mib / c->placed : 0, c->fit_h,
           c->together_h);
  }
}

static gboolean
run_churn(const char *label, QpHost *host, guint64 total, HostSum *hs,
          GError **error)
{
  g_autoptr(SimState) empty = state_of_host(host);
  for (int seed = opt_first_seed; seed < opt_first_seed + opt_churn_seeds;
       seed++) {
    SimChurnParams p = {(guint32)seed,  opt_churn_hours,  opt_churn_life,
                        opt_churn_load, opt_churn_period, empty};
    g_autoptr(GArray) arr = sim_churn_arrivals(&p, total);
    SimChurnResult r[N_ALL];
    for (guint s = 0; s < N_ALL; s++)
      if (!run_churn_one(host, arr, &p, s, &r[s], hs->times, error))
        return FALSE;
    for (guint s = 0; s < N_ALL; s++) {
      SimChurnResult *c = &hs->churn[s];
      c->arrivals += r[s].arrivals;
      c->placed += r[s].placed;
      c->refused += r[s].refused;
      c->local_h += r[s].local_h;
      c->spanning_h += r[s].spanning_h;
      c->fit_h += r[s].fit_h;
      c->together_h += r[s].together_h;
      c->gib_h += r[s].gib_h;
      c->moved_mib += r[s].moved_mib;
      c->moves += r[s].moves;
      const SimChurnResult *q = &r[STRAT_REBALANCE];
      if (is_baseline(s) && r[s].local_h > q->local_h)
        g_ptr_array_add(
            hs->behind,
            g_strdup_printf("%s, churn seed %d: %s %.0f node-local VM-hours "
                            "of %.0f placed, %.0f GiB-hours; qemu-pin "
                            "spread+rebalance %.0f of %.0f, %.0f GiB-hours "
                            "(VMs one node could hold: %.0f VM-hours, at most "
                            "%.0f node-local together)",
                            label, seed, strat_name(s), r[s].local_h,
                            r[s].local_h + r[s].spanning_h, r[s].gib_h,
                            q->local_h, q->local_h + q->spanning_h, q->gib_h,
                            q->fit_h, q->together_h));
    }
  }
  return TRUE;
}

static gboolean
run_host(const char *label, QpHost *host, GPtrArray *findings, GPtrArray *sums,
         GError **error)
{
  g_autoptr(SimState) empty = state_of_host(host);
  guint64 total = 0;
  for (guint i = 0; i < empty->n; i++)
    total += empty->total_mib[i];
  HostSum *hs = g_new0(HostSum, 1);
  hs->label = g_strdup(label);
  hs->n_nodes = host->n_nodes;
  hs->total_mib = total;
  hs->behind = g_ptr_array_new_with_free_func(g_free);
  hs->times = g_array_new(FALSE, FALSE, sizeof(SimQpTime));
  g_ptr_array_add(sums, hs);
  return run_storms(label, host, total, findings, hs, error) &&
         (opt_churn_seeds < 1 || run_churn(label, host, total, hs, error));
}

static int
time_cmp(gconstpointer a, gconstpointer b)
{
  double x = ((const SimQpTime *)a)->us, y = ((const SimQpTime *)b)->us;
  return x < y ? -1 : x > y;
}

/* Per host: the rebalance planner's wall time per call (spread +
 * rebalance, storms and churn). */
static void
print_timing(GPtrArray *sums)
{
  printf("\n#### Rebalance planner time\n\n"
         "Wall time of each qp_rebalance_compute() of spread + rebalance "
         "(storms and churn): each VM that would span or be refused, each "
         "hourly pass.\n\n"
         "| host | calls | live VMs, most | median (ms) | 99th percentile "
         "(ms) | max (ms) | live VMs at the max |\n"
         "|---|---:|---:|---:|---:|---:|---:|\n");
  for (guint h = 0; h < sums->len; h++) {
    const HostSum *hs = sums->pdata[h];
    g_autoptr(GArray) t = g_array_copy(hs->times);
    if (t->len == 0)
      continue;
    guint live = 0;
    for (guint x = 0; x < t->len; x++)
      live = MAX(live, g_array_index(t, SimQpTime, x).live);
    g_array_sort(t, time_cmp);
    const SimQpTime *max = &g_array_index(t, SimQpTime, t->len - 1);
    printf("| %s | %u | %u | %.3f | %.3f | %.3f | %u |\n", hs->label, t->len,
           live, g_array_index(t, SimQpTime, t->len / 2).us / 1000,
           g_array_index(t, SimQpTime, t->len * 99 / 100).us / 1000,
           max->us / 1000, max->live);
  }
}

/* Per host: spread + rebalance against spread and the best baseline. */
static void
print_verdicts(GPtrArray *sums)
{
  printf("\n#### Spread + rebalance: the verdicts\n\n");
  for (guint h = 0; h < sums->len; h++) {
    const HostSum *hs = sums->pdata[h];
    guint best_storm = 0, best_churn = 0;
    for (guint b = 0; b < N_ALL; b++)
      if (is_baseline(b)) {
        best_storm = MAX(best_storm, hs->storm[b].placed);
        best_churn = MAX(best_churn, hs->churn[b].placed);
      }
    const SimChurnResult *rb = &hs->churn[STRAT_REBALANCE];
    const SimChurnResult *sp = &hs->churn[STRAT_SPREAD];
    printf("- %s: storms %u VMs placed (best baseline %u), churn %u (best "
           "baseline %u); churn node-local VM-hours %.0f vs spread %.0f "
           "(%+.1f%%; every VM one node holds node-local all its life would "
           "be %+.1f%%, and with the VMs live together at most %+.1f%%); "
           "%.0f MiB moved per placed VM\n",
           hs->label, hs->storm[STRAT_REBALANCE].placed, best_storm, rb->placed,
           best_churn, rb->local_h, sp->local_h,
           sp->local_h > 0 ? 100 * (rb->local_h / sp->local_h - 1) : 0,
           sp->local_h > 0 ? 100 * (rb->fit_h / sp->local_h - 1) : 0,
           sp->local_h > 0 ? 100 * (rb->together_h / sp->local_h - 1) : 0,
           rb->placed ? (double)rb->moved_mib / rb->placed : 0);
  }
  printf("\n#### Runs where a baseline has more node-local VMs than "
         "spread + rebalance\n\n");
  guint listed = 0;
  for (guint h = 0; h < sums->len; h++) {
    const HostSum *hs = sums->pdata[h];
    for (guint x = 0; x < hs->behind->len; x++, listed++)
      printf("- %s\n", (const char *)hs->behind->pdata[x]);
  }
  if (listed == 0)
    printf("none\n");
}

int
main(int argc, char **argv)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GOptionContext) octx = g_option_context_new("");
  g_option_context_set_summary(octx, "Boot storms on recorded and synthetic "
                                     "hosts: qemu-pin's planner vs baseline "
                                     "placers.");
  g_option_context_add_main_entries(octx, entries, NULL);
  if (!g_option_context_parse(octx, &argc, &argv, &error)) {
    g_printerr("simulate: %s\n", error->message);
    return 2;
  }
  if (opt_seeds < 1) {
    g_printerr("simulate: --seeds %d: expected at least 1\n", opt_seeds);
    return 2;
  }
  const char *dir = opt_topologies;
  if (dir == NULL)
    dir = g_getenv("QP_TOPOLOGIES");
  if (dir == NULL)
    dir = QP_TOPOLOGY_DIR;

  struct {
    const char *label;
    const char *file;      /* recorded, or NULL */
    const char *synthetic; /* else */
  } hosts[] = {
      {"EPYC 7351P (epyc-7351p.xml)", "epyc-7351p.xml", NULL},
      {"2 sockets x 4 nodes (2s-8node.xml)", "2s-8node.xml", NULL},
      {"2x EPYC 7763 (epyc-7763-2s.xml)", "epyc-7763-2s.xml", NULL},
      {"synthetic 4 sockets x 4 nodes", NULL,
       "pack:4 numa:4(memory=64GiB) core:8 pu:2"},
  };
  g_autoptr(GPtrArray) findings = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GPtrArray) sums = g_ptr_array_new_with_free_func(host_sum_free);
  if (opt_markdown)
    printf(
        "Storms: vCPUs in {2,4,8,16} (weights 4:4:3:1), 1, 2 or 4 GiB per "
        "vCPU, asking for 150%% of the host's memory; qemu-pin in mode "
        "balanced. A baseline does better in a storm when it has at least as "
        "many VMs node-local and as much memory placed, and more of one.\n");
  for (guint h = 0; h < G_N_ELEMENTS(hosts); h++) {
    g_autoptr(QpHost) host = NULL;
    if (opt_host != NULL && strstr(hosts[h].label, opt_host) == NULL)
      continue;
    if (hosts[h].file != NULL) {
      g_autofree char *path = g_build_filename(dir, hosts[h].file, NULL);
      host = qp_host_load(path, &error);
    } else {
      host = qp_host_load_synthetic(hosts[h].synthetic, &error);
      if (host != NULL)
        set_distances(host);
    }
    if (host == NULL ||
        !run_host(hosts[h].label, host, findings, sums, &error)) {
      g_printerr("simulate: %s: %s\n", hosts[h].label, error->message);
      return 1;
    }
  }
  /* Spread is expected to lose node-locality to packers: count its storms,
   * list pack's. */
  guint spread_losses = 0;
  for (guint i = 0; i < findings->len; i++)
    if (strstr(g_ptr_array_index(findings, i), ": qemu-pin spread ") != NULL)
      spread_losses++;
  if (opt_markdown)
    printf("\n#### Storms where a baseline does better than qemu-pin pack\n\n");
  else
    printf("\n# storms where a baseline does better than qemu-pin pack\n");
  guint listed = 0;
  for (guint i = 0; i < findings->len; i++) {
    const char *f = g_ptr_array_index(findings, i);
    if (strstr(f, ": qemu-pin pack ") == NULL)
      continue;
    printf("%s%s\n", opt_markdown ? "- " : "", f);
    listed++;
  }
  if (listed == 0)
    printf("none\n");
  printf("%s(storm, baseline) pairs where a baseline does better than qemu-pin "
         "spread: %u\n",
         opt_markdown ? "\n" : "\n# ", spread_losses);
  if (opt_churn_seeds > 0) {
    printf("\n### Churn\n\nVMs arrive as a Poisson process and live for an "
           "exponential time (mean %.0f h), sizes as in the storms; the "
           "arrival rate makes the memory the live VMs ask for %.0f%% of the "
           "host's on average; %.0f simulated hours per run, starting empty. "
           "Movers pass every %.0f h; a moved VM stays %d s. VM-hours count "
           "where each VM is while it lives.\n",
           opt_churn_life, 100 * opt_churn_load, opt_churn_hours,
           opt_churn_period, opt_cooldown);
    for (guint h = 0; h < sums->len; h++)
      print_churn(sums->pdata[h]);
  }
  if (opt_timing)
    print_timing(sums);
  print_verdicts(sums);
  g_free(opt_topologies);
  g_free(opt_host);
  return 0;
}
