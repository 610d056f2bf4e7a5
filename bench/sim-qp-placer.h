/* qemu-pin's planner as a placer of the simulator's churn driver
 * (sim-churn.h): the real planner (qp_plan_compute, mode balanced) with the
 * claims accumulating as the ledger's would, and, for spread + rebalance,
 * the rebalance planner (topology/plan/rebalance.h) applied when a VM would
 * span or be refused, and in the periodic pass. */
#pragma once

#include <glib.h>

#include "bench/sim-churn.h"
#include "topology/host/host.h"
#include "topology/plan/placement.h"

G_BEGIN_DECLS

typedef struct SimQpPlacer SimQpPlacer;

/* A placer on HOST for N_VMS arrival indexes; REBALANCE: moves VMs (a VM
 * moved less than COOLDOWN_S ago stays). */
SimQpPlacer *sim_qp_placer_new(const QpHost *host, QpStrategy strategy,
                               gboolean rebalance, gint64 cooldown_s,
                               guint n_vms);
void sim_qp_placer_free(SimQpPlacer *p);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SimQpPlacer, sim_qp_placer_free)
void sim_qp_placer_bind(SimQpPlacer *p, SimPlacer *out);

/* Prints every placement and move on stderr (simulate --trace). */
void sim_qp_placer_set_trace(SimQpPlacer *p, gboolean on);

/* Each call of the rebalance planner: its wall time and the live VMs it
 * was given. */
typedef struct {
  double us;
  guint live;
} SimQpTime;
const GArray *sim_qp_placer_times(const SimQpPlacer *p); /* of SimQpTime */

/* The first error of the planner other than "does not fit", or NULL. */
const GError *sim_qp_placer_error(const SimQpPlacer *p);

/* What the live VMs hold now: VM V's vCPUs inside one L3 (its CPU sets),
 * and the memory no claim has, in MiB. */
gboolean sim_qp_placer_one_l3(const SimQpPlacer *p, guint v);
guint64 sim_qp_placer_free_mib(const SimQpPlacer *p);

G_END_DECLS
