/* The simulator's churn driver (bench/sim-churn.c) on small hosts worked
 * out by hand. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "bench/sim-churn.h"

/* Two nodes of 8 GiB and 4 CPUs. */
static SimState *
two_nodes(void)
{
  SimState *s = sim_state_new(2);
  for (guint i = 0; i < 2; i++) {
    s->cpus[i] = 4;
    s->total_mib[i] = s->free_mib[i] = 8192;
  }
  return s;
}

static void
add(GArray *a, double at, double until, guint vcpus, guint64 mib)
{
  SimArrival x = {at, until, {vcpus, mib}};
  g_array_append_val(a, x);
}

/* A at 0 (6 GiB, lives past the end), B at 1 (6 GiB), C at 2 (4 GiB: 2 left
 * on each node, so it spans) until 4, D at 3 (8 GiB: no room); A leaves at
 * 2.5 in the second form. */
static GArray *
hand_arrivals(double a_leaves)
{
  GArray *a = g_array_new(FALSE, FALSE, sizeof(SimArrival));
  add(a, 0, a_leaves, 2, 6144);
  add(a, 1, 10, 2, 6144);
  add(a, 2, 4, 2, 4096);
  add(a, 3, 10, 2, 8192);
  return a;
}

static const SimChurnParams hand = {1, 5, 10, 0.9, 1};

static void
test_vm_hours_by_hand(void)
{
  g_autoptr(GArray) arr = hand_arrivals(10);
  g_autoptr(SimStatePlacer) p =
      sim_state_placer_new(two_nodes(), SIM_FIRST_FIT, SIM_MOVER_NONE, 4);
  SimPlacer pl;
  sim_state_placer_bind(p, &pl);
  SimChurnResult r;
  sim_churn_run(arr, &hand, &pl, &r);
  g_assert_cmpuint(r.arrivals, ==, 4);
  g_assert_cmpuint(r.placed, ==, 3);
  g_assert_cmpuint(r.refused, ==, 1); /* D */
  /* A 0-5 and B 1-5 on one node, C 2-4 on two. */
  g_assert_cmpfloat_with_epsilon(r.local_h, 9.0, 1e-9);
  g_assert_cmpfloat_with_epsilon(r.spanning_h, 2.0, 1e-9);
  g_assert_cmpuint(r.moves, ==, 0);
  g_assert_cmpuint(r.moved_mib, ==, 0);
  /* C's departure gave its memory back: 2 GiB free on each node. */
  const SimState *s = sim_state_placer_state(p);
  g_assert_cmpuint(s->free_mib[0], ==, 2048);
  g_assert_cmpuint(s->free_mib[1], ==, 2048);
  g_assert_cmpuint(s->instances[0], ==, 1);
  g_assert_cmpuint(s->vcpus[1], ==, 2);
}

/* numad's pass moves C whole to node 0 at 3 h, once A has left (2.5 h);
 * at 2 h (its arrival) neither node could hold it. */
static void
test_numad_moves_after_a_departure(void)
{
  g_autoptr(GArray) arr = hand_arrivals(2.5);
  g_autoptr(SimStatePlacer) p =
      sim_state_placer_new(two_nodes(), SIM_PROXMOX, SIM_MOVER_NUMAD, 4);
  SimPlacer pl;
  sim_state_placer_bind(p, &pl);
  SimChurnResult r;
  sim_churn_run(arr, &hand, &pl, &r);
  g_assert_cmpuint(r.moves, ==, 1);
  g_assert_cmpuint(r.moved_mib, ==, 2048); /* half of C was on node 0 */
  /* D (8 GiB) arrives at 3, before the pass at 3 (departures, arrivals,
   * then the pass): 6 GiB on node 0, none on 1; refused. A 0-2.5, B 1-5,
   * C 3-4 local; C 2-3 spanning. */
  g_assert_cmpuint(r.placed, ==, 3);
  g_assert_cmpfloat_with_epsilon(r.local_h, 7.5, 1e-9);
  g_assert_cmpfloat_with_epsilon(r.spanning_h, 1.0, 1e-9);
}

/* Without a mover the same run keeps C spanning until it leaves. */
static void
test_no_mover_keeps_spanning(void)
{
  g_autoptr(GArray) arr = hand_arrivals(2.5);
  g_autoptr(SimStatePlacer) p =
      sim_state_placer_new(two_nodes(), SIM_PROXMOX, SIM_MOVER_NONE, 4);
  SimPlacer pl;
  sim_state_placer_bind(p, &pl);
  g_assert_null(pl.tick);
  SimChurnResult r;
  sim_churn_run(arr, &hand, &pl, &r);
  g_assert_cmpuint(r.moves, ==, 0);
  g_assert_cmpfloat_with_epsilon(r.spanning_h, 2.0, 1e-9);
  g_assert_cmpfloat_with_epsilon(r.local_h, 6.5, 1e-9);
}

/* The hours of VMs one node of the given empty host holds: with nodes of
 * 8 GiB every VM of the run (A 0-5, B 1-5, C 2-4: 11 h); with nodes of
 * 5 GiB only C (4 GiB, 2 h); without a host none. */
static void
test_fit_hours(void)
{
  g_autoptr(SimState) big = two_nodes();
  g_autoptr(SimState) small = two_nodes();
  small->total_mib[0] = small->total_mib[1] = 5120;
  const SimState *empties[] = {big, small, NULL};
  const double want[] = {11.0, 2.0, 0.0};
  for (guint x = 0; x < G_N_ELEMENTS(empties); x++) {
    g_autoptr(GArray) arr = hand_arrivals(10);
    g_autoptr(SimStatePlacer) p =
        sim_state_placer_new(two_nodes(), SIM_FIRST_FIT, SIM_MOVER_NONE, 4);
    SimPlacer pl;
    sim_state_placer_bind(p, &pl);
    SimChurnParams params = hand;
    params.empty = empties[x];
    SimChurnResult r;
    sim_churn_run(arr, &params, &pl, &r);
    g_assert_cmpfloat_with_epsilon(r.fit_h, want[x], 1e-9);
    g_assert_cmpfloat_with_epsilon(r.local_h, 9.0, 1e-9);
  }
}

/* Three VMs of 5 GiB on two nodes of 8 GiB: their 15 GiB fit the host's
 * 16, but no node holds two, so at most two are node-local at once. X
 * 0-5, Y 1-5, Z 2-4: one node each could hold 11 VM-hours, together at
 * most 9 (1 + 2 + 2 x 2 + 2), which first-fit reaches (Z spans). */
static void
test_together_hours(void)
{
  g_autoptr(SimState) e = two_nodes();
  guint64 five[] = {5120, 5120, 5120};
  g_assert_cmpuint(sim_churn_together(e, five, 3, 0), ==, 2);
  guint64 mixed[] = {6144, 2048, 4096, 2048}; /* 14 GiB: all four */
  g_assert_cmpuint(sim_churn_together(e, mixed, 4, 0), ==, 4);
  g_assert_cmpuint(mixed[0], ==, 2048); /* sorted, smallest first */
  guint64 heavy[] = {8192, 8192, 1024}; /* 17 GiB: the two smallest */
  g_assert_cmpuint(sim_churn_together(e, heavy, 3, 0), ==, 2);
  /* Beside a VM no node holds alone, of 10 GiB: 6 GiB left for them. */
  guint64 small[] = {4096, 2048, 1024};
  g_assert_cmpuint(sim_churn_together(e, small, 3, 10240), ==, 2);
  g_assert_cmpuint(sim_churn_together(NULL, heavy, 3, 0), ==, 0);

  GArray *arr = g_array_new(FALSE, FALSE, sizeof(SimArrival));
  add(arr, 0, 10, 2, 5120);
  add(arr, 1, 10, 2, 5120);
  add(arr, 2, 4, 2, 5120);
  g_autoptr(SimStatePlacer) p =
      sim_state_placer_new(two_nodes(), SIM_FIRST_FIT, SIM_MOVER_NONE, 3);
  SimPlacer pl;
  sim_state_placer_bind(p, &pl);
  SimChurnParams params = hand;
  params.empty = e;
  SimChurnResult r;
  sim_churn_run(arr, &params, &pl, &r);
  g_array_unref(arr);
  g_assert_cmpfloat_with_epsilon(r.fit_h, 11.0, 1e-9);
  g_assert_cmpfloat_with_epsilon(r.together_h, 9.0, 1e-9);
  g_assert_cmpfloat_with_epsilon(r.local_h, 9.0, 1e-9);
  g_assert_cmpfloat_with_epsilon(r.spanning_h, 2.0, 1e-9);
}

/* Arrivals: the same seed gives the same list; in time order, inside the
 * run, each VM of the storms' sizes; the count near rate * hours. */
static void
test_arrivals(void)
{
  SimChurnParams p = {7, 1000, 10, 0.9, 1};
  const guint64 total = 256 * 1024;
  g_autoptr(GArray) a = sim_churn_arrivals(&p, total);
  g_autoptr(GArray) b = sim_churn_arrivals(&p, total);
  p.seed = 8;
  g_autoptr(GArray) c = sim_churn_arrivals(&p, total);
  g_assert_cmpuint(a->len, ==, b->len);
  g_assert_cmpmem(a->data, a->len * sizeof(SimArrival), b->data,
                  b->len * sizeof(SimArrival));
  g_assert_true(a->len != c->len ||
                memcmp(a->data, c->data, a->len * sizeof(SimArrival)) != 0);
  double expect = 0.9 * total / (sim_vm_mean_mib() * 10) * 1000;
  g_assert_cmpfloat(fabs(a->len - expect), <, 0.1 * expect);
  double life = 0;
  for (guint v = 0; v < a->len; v++) {
    const SimArrival *x = &g_array_index(a, SimArrival, v);
    g_assert_cmpfloat(x->arrive_h, <, 1000);
    g_assert_cmpfloat(x->leave_h, >, x->arrive_h);
    if (v > 0)
      g_assert_cmpfloat(x->arrive_h, >=,
                        g_array_index(a, SimArrival, v - 1).arrive_h);
    g_assert_true(x->vm.vcpus == 2 || x->vm.vcpus == 4 || x->vm.vcpus == 8 ||
                  x->vm.vcpus == 16);
    guint64 per = x->vm.mem_mib / x->vm.vcpus / 1024;
    g_assert_true(per == 1 || per == 2 || per == 4);
    life += x->leave_h - x->arrive_h;
  }
  /* Mean lifetime near 10 h. */
  g_assert_cmpfloat(fabs(life / a->len - 10), <, 1.5);
  /* 2-16 vCPUs (weights 4:4:3:1), 1-4 GiB per vCPU (1:1:1): 12.44 GiB. */
  g_assert_cmpfloat_with_epsilon(sim_vm_mean_mib(), 64.0 / 12 * 7 / 3 * 1024,
                                 1e-6);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/sim/churn/vm-hours-by-hand", test_vm_hours_by_hand);
  g_test_add_func("/sim/churn/numad-moves-after-a-departure",
                  test_numad_moves_after_a_departure);
  g_test_add_func("/sim/churn/fit-hours", test_fit_hours);
  g_test_add_func("/sim/churn/together-hours", test_together_hours);
  g_test_add_func("/sim/churn/no-mover-keeps-spanning",
                  test_no_mover_keeps_spanning);
  g_test_add_func("/sim/churn/arrivals", test_arrivals);
  return g_test_run();
}
