/* The plan a mode fills (topology/plan/result.c). */
#pragma once

#include "topology/plan/memory.h"

G_BEGIN_DECLS

/* An empty plan for N vCPUs. */
QpPlan *qp_plan_new(guint n);
/* Drops every piece of memory the plan holds (a failed try). */
void qp_plan_mem_drop(QpPlan *plan);

void qp_plan_add_reason(QpPlan *plan, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
void qp_plan_add_warning(QpPlan *plan, const char *fmt, ...)
    G_GNUC_PRINTF(2, 3);

/* The plan's entry for piece X, bound to NODES (NULL: not bound), with
 * what ACC claimed for it. */
void qp_plan_add_mem(QpPlan *plan, const Ctx *ctx, const Acc *acc, guint x,
                     hwloc_const_bitmap_t nodes);
/* The plan's entry for every piece: on its own nodes (Piece.fixed), else
 * on node index HOME[gi] of its guest node (the whole guest: HOME[0]), or
 * not bound when that is -1. */
void qp_plan_add_mem_at_homes(QpPlan *plan, const Ctx *ctx, const Acc *acc,
                              const int *home);
/* The node ids of K node indexes. */
hwloc_bitmap_t qp_plan_ids_of(const Ctx *ctx, const guint *nodes, guint k);

/* The ids of the nodes where piece X is claimed (empty: nowhere). */
hwloc_bitmap_t qp_plan_piece_ids(const Ctx *ctx, const Acc *acc, guint x);
/* Fills claims, emulator/iothread/startup sets and host_nodes from what the
 * mode decided (vcpu_cpus, process_cpus, dedicated, mem, ACC). VM_NODES are
 * the node indexes whose CPUs the VM uses. */
void qp_plan_finish_plan(QpPlan *plan, const Ctx *ctx, const Attempt *a,
                         const Acc *acc, const gboolean *vm_nodes);

/* Fills PLAN->cpu_load from its shared vCPUs (not one-to-one): the vCPUs
 * with the same CPU set, per set. */
void qp_plan_fill_cpu_load(QpPlan *plan);

G_END_DECLS
