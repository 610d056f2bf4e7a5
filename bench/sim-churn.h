/* Churn for the placement simulator: VMs arrive and leave over time, and
 * each placer is scored on how its VMs spent their hours (on one node or
 * spanning), what it refused and what it moved.
 *
 * Arrivals are a Poisson process (seeded), lifetimes exponential, sizes
 * drawn as the storms draw them (sim_vm_draw()); the arrival rate is set
 * so that the memory the live VMs ask for is LOAD of the host's on average
 * (Little's law: rate = load * host memory / (mean size * mean life)). The
 * driver walks the events in time order (departures before arrivals at the
 * same instant, then the periodic pass), and between two events adds each
 * live VM's time to node-local or spanning hours by the nodes it is on. */
#pragma once

#include <glib.h>

#include "bench/sim-baselines.h"

G_BEGIN_DECLS

typedef struct {
  guint32 seed;
  double hours;       /* simulated time; VMs alive at the end stop there */
  double mean_life_h; /* mean lifetime */
  double load;        /* asked-for memory / host memory, on average */
  double period_h;    /* a placer's periodic pass, every PERIOD_H */
  /* The empty host, to count the hours of VMs one of its nodes holds
   * (memory and vCPUs): what node-local VM-hours can reach at most with
   * the same VMs placed. NULL: not counted. */
  const SimState *empty;
} SimChurnParams;

typedef struct {
  double arrive_h, leave_h;
  SimVm vm;
} SimArrival;

/* One VM of the storms' distribution: vCPUs in {2,4,8,16} (4:4:3:1), 1, 2
 * or 4 GiB per vCPU. */
SimVm sim_vm_draw(GRand *r);

/* Mean memory of sim_vm_draw()'s distribution, in MiB. */
double sim_vm_mean_mib(void);

/* The arrivals of P on a host of TOTAL_MIB, by arrival time. */
GArray *sim_churn_arrivals(const SimChurnParams *p, guint64 total_mib);

/* A placer as the driver sees it. Arrival index V names a VM. */
typedef struct {
  gpointer data;
  /* Places V; FALSE: refused. */
  gboolean (*place)(gpointer data, guint v, const SimVm *vm, double now_h);
  void (*leave)(gpointer data, guint v);
  /* The periodic pass (NULL: none). */
  void (*tick)(gpointer data, double now_h);
  /* Nodes VM V is on now. */
  guint (*nodes)(gpointer data, guint v);
  /* MiB it has moved so far, and how many moves. */
  guint64 (*moved_mib)(gpointer data);
  guint (*moves)(gpointer data);
} SimPlacer;

typedef struct {
  guint arrivals, placed, refused;
  double local_h, spanning_h; /* VM-hours */
  double gib_h;               /* GiB-hours of the VMs placed */
  double fit_h; /* VM-hours of VMs one empty node holds (params' EMPTY) */
  /* At most this many node-local VM-hours with these VMs live together:
   * at each moment, the most of the live VMs of fit_h that the empty
   * host's memory, less the other live VMs', could hold one node each
   * (sim_churn_together()). */
  double together_h;
  guint64 moved_mib;
  guint moves;
} SimChurnResult;

void sim_churn_run(const GArray *arrivals, const SimChurnParams *p,
                   const SimPlacer *pl, SimChurnResult *r);

/* An upper bound on how many VMs of MIB (N of them, each of which one node
 * of the empty host E holds) can be node-local at once, beside other live
 * VMs that take TAKEN MiB: the most of the smallest whose memory sums to
 * at most E's less TAKEN, and among which at most J per node are larger
 * than 1/(J + 1) of E's largest node (J + 1 of those exceed any node), for
 * J = 1 to 4. Sorts MIB. */
guint sim_churn_together(const SimState *e, guint64 *mib, guint n,
                         guint64 taken);

/* ---- The SimState placers (baselines, numad) in churn ------------------- */

typedef enum {
  SIM_MOVER_NONE,
  SIM_MOVER_NUMAD, /* numad-like: moves a spanning VM whole to the node
                      with the most free memory that holds it, in its
                      periodic pass; no claims, no room made for others */
} SimMover;

typedef struct SimStatePlacer SimStatePlacer;

/* A placer over S (taken) choosing nodes with baseline B, with MOVER's
 * periodic pass, for N_VMS arrival indexes. */
SimStatePlacer *sim_state_placer_new(SimState *s, SimBaseline b, SimMover mover,
                                     guint n_vms);
void sim_state_placer_free(SimStatePlacer *p);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimStatePlacer, sim_state_placer_free)
void sim_state_placer_bind(SimStatePlacer *p, SimPlacer *out);
const SimState *sim_state_placer_state(const SimStatePlacer *p);

/* The nodes (indexes into the state) VM V is on now: *K of them. */
const guint *sim_state_placer_nodes(const SimStatePlacer *p, guint v, guint *k);

/* numad's pass over S's VMs now (for storms: after each launch). */
void sim_state_placer_tick(SimStatePlacer *p);

G_END_DECLS
