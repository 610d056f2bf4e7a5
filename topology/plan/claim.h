/* The planner's edge to the ledger: the claim a plan makes (the record a
 * launch writes), and memory claimed while a VM runs (a memory device
 * plugged over QMP, a virtio-mem device asked to grow or shrink), which
 * the keeper adds to or takes from the VM's own claim. Pure functions,
 * like the planner: the ledger (topology/ledger/) knows no plan. */
#pragma once

#include <glib.h>
#include <hwloc.h>

#include "topology/host/host.h"
#include "topology/ledger/claims.h"
#include "topology/plan/plan.h"

G_BEGIN_DECLS

/* A claim for PLAN (memory, hugepages, dedicated CPUs, load, devices) made
 * now, with record id ID and VM name NAME (made valid UTF-8). PIDs are
 * filled by the caller. */
QpClaim *qp_claim_from_plan(const QpPlan *plan, const char *id,
                            const char *name);

/* Adds UNITS (MiB of ordinary memory when PAGE_KIB is 0, else pages of
 * PAGE_KIB) to CLAIM on the host nodes NODES, split as the planner splits
 * over a node set, if the uncommitted memory there holds them (CLAIMS is
 * the ledger's contents, CLAIM among them; OPTS gives the host reserve).
 * What each node took is added to TAKEN (of QpNodeUnits). Otherwise fails
 * with QP_TOPOLOGY_ERROR_NOFIT naming the nodes and the shortfall, and
 * nothing changes. */
gboolean qp_claim_add_memory(const QpHost *host, const QpClaims *claims,
                             const QpPlacementOptions *opts, QpClaim *claim,
                             hwloc_const_bitmap_t nodes, guint64 page_kib,
                             guint64 units, GArray *taken, GError **error);

/* Gives back UNITS of PAGE_KIB memory that CLAIM holds for one piece,
 * TAKEN (of QpNodeUnits) saying where: the last node first. Both are
 * reduced. */
void qp_claim_drop_memory(QpClaim *claim, GArray *taken, guint64 page_kib,
                          guint64 units);

G_END_DECLS
