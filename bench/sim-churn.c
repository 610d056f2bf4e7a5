/* Churn for the placement simulator: see sim-churn.h. */
#include "bench/sim-churn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const guint draw_vcpus[] = {2, 2, 2, 2, 4, 4, 4, 4, 8, 8, 8, 16};
static const guint draw_gib_per_vcpu[] = {1, 2, 4};

SimVm
sim_vm_draw(GRand *r)
{
  SimVm vm;
  vm.vcpus = draw_vcpus[g_rand_int_range(r, 0, G_N_ELEMENTS(draw_vcpus))];
  vm.mem_mib = (guint64)vm.vcpus *
               draw_gib_per_vcpu[g_rand_int_range(
                   r, 0, G_N_ELEMENTS(draw_gib_per_vcpu))] *
               1024;
  return vm;
}

double
sim_vm_mean_mib(void)
{
  double sum = 0;
  for (guint a = 0; a < G_N_ELEMENTS(draw_vcpus); a++)
    for (guint b = 0; b < G_N_ELEMENTS(draw_gib_per_vcpu); b++)
      sum += (double)draw_vcpus[a] * draw_gib_per_vcpu[b] * 1024;
  return sum / (G_N_ELEMENTS(draw_vcpus) * G_N_ELEMENTS(draw_gib_per_vcpu));
}

/* An exponential draw of mean MEAN (1 - U in (0, 1]: never log(0)). */
static double
exp_draw(GRand *r, double mean)
{
  return -mean * log(1.0 - g_rand_double(r));
}

GArray *
sim_churn_arrivals(const SimChurnParams *p, guint64 total_mib)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(p->seed);
  GArray *a = g_array_new(FALSE, FALSE, sizeof(SimArrival));
  double rate = p->load * (double)total_mib /
                (sim_vm_mean_mib() * p->mean_life_h); /* per hour */
  double t = 0;
  for (;;) {
    t += exp_draw(r, 1.0 / rate);
    if (t >= p->hours)
      break;
    SimArrival x;
    memset(&x, 0, sizeof(x)); /* padding too: tests compare lists bytewise */
    x.arrive_h = t;
    x.vm = sim_vm_draw(r);
    x.leave_h = t + exp_draw(r, p->mean_life_h);
    g_array_append_val(a, x);
  }
  return a;
}

/* ---- The driver ---------------------------------------------------------- */

typedef struct {
  double t;
  int kind; /* 0 departure, 1 arrival, 2 periodic pass */
  guint v;
} Event;

static gint
event_cmp(gconstpointer a, gconstpointer b)
{
  const Event *x = a, *y = b;
  if (x->t != y->t)
    return x->t < y->t ? -1 : 1;
  if (x->kind != y->kind)
    return x->kind - y->kind;
  return x->v < y->v ? -1 : x->v > y->v;
}

/* One node of the empty host E holds VM (memory and vCPUs). */
static gboolean
fits_one(const SimState *e, const SimVm *vm)
{
  for (guint i = 0; e != NULL && i < e->n; i++)
    if (e->total_mib[i] >= vm->mem_mib && e->cpus[i] >= vm->vcpus)
      return TRUE;
  return FALSE;
}

static gint
mib_cmp(gconstpointer a, gconstpointer b)
{
  guint64 x = *(const guint64 *)a, y = *(const guint64 *)b;
  return x < y ? -1 : x > y;
}

#define TOGETHER_J 4

guint
sim_churn_together(const SimState *e, guint64 *mib, guint n, guint64 taken)
{
  if (e == NULL || e->n == 0)
    return 0;
  guint64 total = 0, largest = 0;
  for (guint i = 0; i < e->n; i++) {
    total += e->total_mib[i];
    largest = MAX(largest, e->total_mib[i]);
  }
  total -= MIN(total, taken);
  qsort(mib, n, sizeof(*mib), mib_cmp);
  guint64 sum = 0;
  guint over[TOGETHER_J + 1] = {0}; /* over[j]: taken above largest/(j+1) */
  guint k = 0;
  for (; k < n; k++) {
    sum += mib[k];
    if (sum > total)
      break;
    gboolean room = TRUE;
    for (guint j = 1; j <= TOGETHER_J; j++)
      if (mib[k] * (j + 1) > largest && ++over[j] > j * e->n)
        room = FALSE;
    if (!room)
      break;
  }
  return k;
}

static void
add_time(const SimPlacer *pl, const GArray *arrivals, const SimState *empty,
         const gboolean *live, double dt, SimChurnResult *r)
{
  if (dt <= 0)
    return;
  g_autofree guint64 *fit = g_new(guint64, MAX(arrivals->len, 1));
  guint n_fit = 0;
  guint64 others = 0; /* memory of the live VMs no node holds alone */
  for (guint v = 0; v < arrivals->len; v++)
    if (live[v]) {
      const SimVm *vm = &g_array_index(arrivals, SimArrival, v).vm;
      if (pl->nodes(pl->data, v) > 1)
        r->spanning_h += dt;
      else
        r->local_h += dt;
      r->gib_h += dt * (double)vm->mem_mib / 1024;
      if (fits_one(empty, vm)) {
        r->fit_h += dt;
        fit[n_fit++] = vm->mem_mib;
      } else {
        others += vm->mem_mib;
      }
    }
  r->together_h += dt * sim_churn_together(empty, fit, n_fit, others);
}

void
sim_churn_run(const GArray *arrivals, const SimChurnParams *p,
              const SimPlacer *pl, SimChurnResult *r)
{
  memset(r, 0, sizeof(*r));
  guint n = arrivals->len;
  g_autoptr(GArray) ev = g_array_new(FALSE, FALSE, sizeof(Event));
  for (guint v = 0; v < n; v++) {
    const SimArrival *a = &g_array_index(arrivals, SimArrival, v);
    g_array_append_val(ev, ((Event){a->arrive_h, 1, v}));
    if (a->leave_h < p->hours)
      g_array_append_val(ev, ((Event){a->leave_h, 0, v}));
  }
  for (double t = p->period_h;
       pl->tick != NULL && p->period_h > 0 && t < p->hours; t += p->period_h)
    g_array_append_val(ev, ((Event){t, 2, 0}));
  g_array_sort(ev, event_cmp);
  g_autofree gboolean *live = g_new0(gboolean, MAX(n, 1));
  double now = 0;
  r->arrivals = n;
  for (guint e = 0; e < ev->len; e++) {
    const Event *x = &g_array_index(ev, Event, e);
    add_time(pl, arrivals, p->empty, live, x->t - now, r);
    now = x->t;
    if (x->kind == 2) {
      pl->tick(pl->data, now);
    } else if (x->kind == 1) {
      const SimArrival *a = &g_array_index(arrivals, SimArrival, x->v);
      live[x->v] = pl->place(pl->data, x->v, &a->vm, now);
      if (live[x->v])
        r->placed++;
      else
        r->refused++;
    } else if (live[x->v]) {
      pl->leave(pl->data, x->v);
      live[x->v] = FALSE;
    }
  }
  add_time(pl, arrivals, p->empty, live, p->hours - now, r);
  r->moved_mib = pl->moved_mib(pl->data);
  r->moves = pl->moves(pl->data);
}

/* ---- SimState placers ---------------------------------------------------- */

typedef struct {
  gboolean live;
  SimVm vm;
  guint k;
  guint *nodes;
  guint64 *amounts;
} Held;

struct SimStatePlacer {
  SimState *s;
  SimBaseline b;
  SimMover mover;
  guint n;
  Held *held;
  guint64 moved_mib;
  guint moves;
};

SimStatePlacer *
sim_state_placer_new(SimState *s, SimBaseline b, SimMover mover, guint n_vms)
{
  SimStatePlacer *p = g_new0(SimStatePlacer, 1);
  p->s = s;
  p->b = b;
  p->mover = mover;
  p->n = n_vms;
  p->held = g_new0(Held, MAX(n_vms, 1));
  for (guint v = 0; v < n_vms; v++) {
    p->held[v].nodes = g_new0(guint, MAX(s->n, 1));
    p->held[v].amounts = g_new0(guint64, MAX(s->n, 1));
  }
  return p;
}

void
sim_state_placer_free(SimStatePlacer *p)
{
  if (p == NULL)
    return;
  for (guint v = 0; v < p->n; v++) {
    g_free(p->held[v].nodes);
    g_free(p->held[v].amounts);
  }
  g_free(p->held);
  sim_state_free(p->s);
  g_free(p);
}

const SimState *
sim_state_placer_state(const SimStatePlacer *p)
{
  return p->s;
}

const guint *
sim_state_placer_nodes(const SimStatePlacer *p, guint v, guint *k)
{
  *k = p->held[v].k;
  return p->held[v].nodes;
}

static gboolean
sp_place(gpointer data, guint v, const SimVm *vm, double now_h)
{
  SimStatePlacer *p = data;
  Held *h = &p->held[v];
  (void)now_h;
  if (!sim_baseline_place(p->s, vm, p->b, h->nodes, &h->k))
    return FALSE;
  sim_split(p->s, vm, h->nodes, h->k, h->amounts);
  sim_commit(p->s, vm, h->nodes, h->k, h->amounts);
  h->vm = *vm;
  h->live = TRUE;
  return TRUE;
}

static void
sp_leave(gpointer data, guint v)
{
  SimStatePlacer *p = data;
  Held *h = &p->held[v];
  sim_release(p->s, &h->vm, h->nodes, h->k, h->amounts);
  h->live = FALSE;
  h->k = 0;
}

/* numad: a VM on more than one node moves whole to the node with the most
 * free memory, when that node holds all of it and has CPUs for it. */
void
sim_state_placer_tick(SimStatePlacer *p)
{
  if (p->mover != SIM_MOVER_NUMAD)
    return;
  SimState *s = p->s;
  for (guint v = 0; v < p->n; v++) {
    Held *h = &p->held[v];
    if (!h->live || h->k < 2)
      continue;
    guint best = 0;
    for (guint i = 1; i < s->n; i++)
      if (s->free_mib[i] > s->free_mib[best])
        best = i;
    guint64 here = 0;
    for (guint j = 0; j < h->k; j++)
      if (h->nodes[j] == best)
        here = h->amounts[j];
    if (s->free_mib[best] + here < h->vm.mem_mib || s->cpus[best] < h->vm.vcpus)
      continue;
    sim_release(s, &h->vm, h->nodes, h->k, h->amounts);
    h->k = 1;
    h->nodes[0] = best;
    h->amounts[0] = h->vm.mem_mib;
    sim_commit(s, &h->vm, h->nodes, 1, h->amounts);
    p->moved_mib += h->vm.mem_mib - here;
    p->moves++;
  }
}

static void
sp_tick(gpointer data, double now_h)
{
  (void)now_h;
  sim_state_placer_tick(data);
}

static guint
sp_nodes(gpointer data, guint v)
{
  SimStatePlacer *p = data;
  return p->held[v].k;
}

static guint64
sp_moved_mib(gpointer data)
{
  return ((SimStatePlacer *)data)->moved_mib;
}

static guint
sp_moves(gpointer data)
{
  return ((SimStatePlacer *)data)->moves;
}

void
sim_state_placer_bind(SimStatePlacer *p, SimPlacer *out)
{
  out->data = p;
  out->place = sp_place;
  out->leave = sp_leave;
  out->tick = p->mover == SIM_MOVER_NONE ? NULL : sp_tick;
  out->nodes = sp_nodes;
  out->moved_mib = sp_moved_mib;
  out->moves = sp_moves;
}
