/* qemu-pin's planner as a churn placer: see sim-qp-placer.h. */
#include "bench/sim-qp-placer.h"

#include <stdlib.h>
#include <string.h>

#include "topology/ledger/ledger.h"
#include "topology/plan/capacity.h"
#include "topology/plan/claim.h"
#include "topology/plan/plan.h"
#include "topology/plan/rebalance.h"

/* The simulated clock in unix seconds: 0 means "never moved" to the
 * rebalance planner, so the simulation starts later. */
#define EPOCH_S 1000000

struct SimQpPlacer {
  const QpHost *host;
  QpClaims *claims;
  QpPlacementOptions opts;
  gboolean rebalance;
  gint64 cooldown_s;
  guint n;
  guint *nodes;      /* per arrival: nodes it is on now, 0 if not live */
  gint64 *moved_at;  /* per arrival: unix seconds of its last move, 0 */
  guint64 moved_mib; /* so far */
  guint moves;
  gboolean trace;
  GArray *times; /* of SimQpTime: each rebalance planned */
  GError *error;
};

SimQpPlacer *
sim_qp_placer_new(const QpHost *host, QpStrategy strategy, gboolean rebalance,
                  gint64 cooldown_s, guint n_vms)
{
  SimQpPlacer *p = g_new0(SimQpPlacer, 1);
  p->host = host;
  p->claims = qp_claims_new();
  qp_placement_options_init(&p->opts);
  p->opts.mode = QP_MODE_BALANCED;
  p->opts.strategy = strategy;
  p->rebalance = rebalance;
  p->cooldown_s = cooldown_s;
  p->n = n_vms;
  p->nodes = g_new0(guint, MAX(n_vms, 1));
  p->moved_at = g_new0(gint64, MAX(n_vms, 1));
  p->times = g_array_new(FALSE, FALSE, sizeof(SimQpTime));
  return p;
}

void
sim_qp_placer_free(SimQpPlacer *p)
{
  if (p == NULL)
    return;
  qp_claims_free(p->claims);
  qp_placement_options_clear(&p->opts);
  g_free(p->nodes);
  g_free(p->moved_at);
  g_array_unref(p->times);
  g_clear_error(&p->error);
  g_free(p);
}

void
sim_qp_placer_set_trace(SimQpPlacer *p, gboolean on)
{
  p->trace = on;
}

/* With the trace on: WHAT happened at NOW_H, each move of R (NULL: none),
 * and the room left on every node. */
static void
trace(const SimQpPlacer *p, const char *what, double now_h,
      const QpRebalance *r)
{
  if (!p->trace)
    return;
  g_autoptr(GString) t = g_string_new(NULL);
  g_string_append_printf(t, "spread+rebalance %8.3f h %s", now_h, what);
  for (guint m = 0; r != NULL && m < r->moves->len; m++) {
    const QpMove *mv = r->moves->pdata[m];
    g_autofree char *from = qp_list_format(mv->from);
    g_autofree char *to = qp_list_format(mv->to);
    g_string_append_printf(t, "; move %s %s->%s %" G_GUINT64_FORMAT " MiB%s",
                           mv->vm, from, to, mv->mib,
                           mv->consolidate ? " (a)" : "");
  }
  g_string_append(t, "; room (MiB):");
  for (guint i = 0; i < p->host->n_nodes; i++) {
    QpNodeMemory m;
    qp_node_memory(p->host, p->claims, &p->opts, i, &m);
    g_string_append_printf(t, " %" G_GUINT64_FORMAT, m.uncommitted_mib);
  }
  g_printerr("%s\n", t->str);
}

const GArray *
sim_qp_placer_times(const SimQpPlacer *p)
{
  return p->times;
}

const GError *
sim_qp_placer_error(const SimQpPlacer *p)
{
  return p->error;
}

/* Arrival index of a claim id "vmN". */
static guint
index_of(const char *id)
{
  return (guint)strtoul(id + 2, NULL, 10);
}

static guint
claim_nodes(const QpClaim *c)
{
  g_auto(hwloc_bitmap_t) set = hwloc_bitmap_alloc();
  for (guint x = 0; x < c->mem->len; x++)
    if (g_array_index(c->mem, QpNodeAmount, x).mib > 0)
      hwloc_bitmap_set(set,
                       (unsigned)g_array_index(c->mem, QpNodeAmount, x).node);
  for (guint x = 0; x < c->load->len; x++)
    if (g_array_index(c->load, QpNodeLoad, x).vcpus > 0)
      hwloc_bitmap_set(set,
                       (unsigned)g_array_index(c->load, QpNodeLoad, x).node);
  return (guint)hwloc_bitmap_weight(set);
}

static void
keep_error(SimQpPlacer *p, GError *err)
{
  if (p->error == NULL)
    p->error = err;
  else
    g_error_free(err);
}

/* Runs the rebalance planner (for REQ, or goal (a) alone) at NOW and makes
 * its moves when they give REQ fewer nodes than WITHOUT (0: refused), or
 * without REQ when there are any. The plan for REQ after them in *PLAN. */
static void
rebalance(SimQpPlacer *p, const QpRequest *req, guint without, gint64 now,
          QpPlan **plan)
{
  guint nc = p->claims->claims->len;
  g_autofree QpRebalanceVm *vms = g_new0(QpRebalanceVm, MAX(nc, 1));
  for (guint x = 0; x < nc; x++) {
    const QpClaim *c = p->claims->claims->pdata[x];
    vms[x].id = c->id;
    vms[x].moved_at = p->moved_at[index_of(c->id)];
  }
  QpRebalanceOptions ro = {
      .now = now, .cooldown_s = p->cooldown_s, .req = req, .opts = &p->opts};
  GError *err = NULL;
  gint64 t0 = g_get_monotonic_time();
  g_autoptr(QpRebalance) r =
      qp_rebalance_compute(p->host, p->claims, vms, nc, &ro, &err);
  SimQpTime t = {(double)(g_get_monotonic_time() - t0), nc};
  g_array_append_val(p->times, t);
  if (r == NULL) {
    keep_error(p, err);
    return;
  }
  gboolean better =
      req == NULL
          ? r->moves->len > 0
          : r->plan != NULL && (without == 0 || r->req_nodes_after < without);
  if (!better)
    return;
  qp_claims_free(p->claims);
  p->claims = g_steal_pointer(&r->after);
  trace(p, req == NULL ? "pass" : "room", (double)(now - EPOCH_S) / 3600, r);
  p->moved_mib += r->mib;
  p->moves += r->moves->len;
  for (guint m = 0; m < r->moves->len; m++)
    p->moved_at[index_of(((QpMove *)r->moves->pdata[m])->vm)] = now;
  for (guint x = 0; x < p->claims->claims->len; x++) {
    const QpClaim *c = p->claims->claims->pdata[x];
    p->nodes[index_of(c->id)] = claim_nodes(c);
  }
  if (plan != NULL) {
    qp_plan_free(*plan);
    *plan = g_steal_pointer(&r->plan);
  }
}

static gint64
now_s(double now_h)
{
  return EPOCH_S + (gint64)(now_h * 3600);
}

static gboolean
qp_place(gpointer data, guint v, const SimVm *vm, double now_h)
{
  SimQpPlacer *p = data;
  g_autoptr(QpRequest) req = qp_request_new();
  req->vcpus = req->maxcpus = vm->vcpus;
  req->cores = vm->vcpus;
  req->mem_mib = vm->mem_mib;
  GError *err = NULL;
  QpPlan *plan = qp_plan_compute(p->host, p->claims, req, &p->opts, &err);
  if (plan == NULL &&
      !g_error_matches(err, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_NOFIT)) {
    keep_error(p, err);
    return FALSE;
  }
  g_clear_error(&err);
  guint k = plan != NULL ? (guint)hwloc_bitmap_weight(plan->host_nodes) : 0;
  if (p->rebalance && k != 1)
    rebalance(p, req, k, now_s(now_h), &plan);
  if (plan == NULL) {
    if (p->trace) {
      g_autofree char *what =
          g_strdup_printf("vm%u %u vCPUs %" G_GUINT64_FORMAT " MiB refused", v,
                          vm->vcpus, vm->mem_mib);
      trace(p, what, now_h, NULL);
    }
    return FALSE;
  }
  g_autofree char *id = g_strdup_printf("vm%u", v);
  QpClaim *c = qp_claim_from_plan(plan, id, id);
  p->nodes[v] = claim_nodes(c);
  g_ptr_array_add(p->claims->claims, c);
  if (p->trace) {
    g_autoptr(GString) what = g_string_new(NULL);
    g_string_append_printf(what, "%s %u vCPUs %" G_GUINT64_FORMAT " MiB ->", id,
                           vm->vcpus, vm->mem_mib);
    for (guint x = 0; x < c->mem->len; x++)
      g_string_append_printf(what, " %d:%" G_GUINT64_FORMAT,
                             g_array_index(c->mem, QpNodeAmount, x).node,
                             g_array_index(c->mem, QpNodeAmount, x).mib);
    trace(p, what->str, now_h, NULL);
  }
  qp_plan_free(plan);
  return TRUE;
}

static void
qp_leave(gpointer data, guint v)
{
  SimQpPlacer *p = data;
  for (guint x = 0; x < p->claims->claims->len; x++)
    if (index_of(((QpClaim *)p->claims->claims->pdata[x])->id) == v) {
      g_ptr_array_remove_index(p->claims->claims, x);
      break;
    }
  p->nodes[v] = 0;
}

static void
qp_tick(gpointer data, double now_h)
{
  SimQpPlacer *p = data;
  rebalance(p, NULL, 0, now_s(now_h), NULL);
}

static guint
qp_nodes(gpointer data, guint v)
{
  return ((SimQpPlacer *)data)->nodes[v];
}

static guint64
qp_moved_mib(gpointer data)
{
  return ((SimQpPlacer *)data)->moved_mib;
}

static guint
qp_moves(gpointer data)
{
  return ((SimQpPlacer *)data)->moves;
}

void
sim_qp_placer_bind(SimQpPlacer *p, SimPlacer *out)
{
  out->data = p;
  out->place = qp_place;
  out->leave = qp_leave;
  out->tick = p->rebalance ? qp_tick : NULL;
  out->nodes = qp_nodes;
  out->moved_mib = qp_moved_mib;
  out->moves = qp_moves;
}

gboolean
sim_qp_placer_one_l3(const SimQpPlacer *p, guint v)
{
  const QpClaim *c = NULL;
  for (guint x = 0; x < p->claims->claims->len && c == NULL; x++)
    if (index_of(((QpClaim *)p->claims->claims->pdata[x])->id) == v)
      c = p->claims->claims->pdata[x];
  if (c == NULL)
    return FALSE;
  g_auto(hwloc_bitmap_t) cpus = hwloc_bitmap_dup(c->dedicated);
  for (guint x = 0; x < c->cpu_load->len; x++)
    hwloc_bitmap_or(cpus, cpus, g_array_index(c->cpu_load, QpCpuLoad, x).cpus);
  if (hwloc_bitmap_iszero(cpus))
    return FALSE;
  for (guint d = 0; d < p->host->n_domains; d++)
    if (p->host->domains[d].level == QP_CACHE_L3 &&
        hwloc_bitmap_isincluded(cpus, p->host->domains[d].cpus))
      return TRUE;
  return FALSE;
}

guint64
sim_qp_placer_free_mib(const SimQpPlacer *p)
{
  guint64 sum = 0;
  for (guint i = 0; i < p->host->n_nodes; i++) {
    QpNodeMemory m;
    qp_node_memory(p->host, p->claims, &p->opts, i, &m);
    sum += m.uncommitted_mib;
  }
  return sum;
}
