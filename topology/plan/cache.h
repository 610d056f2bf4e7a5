/* Cache domains in the planner (topology/plan/cache.c): which free cores of
 * a node a one-to-one VM takes, and where a balanced VM floats. */
#pragma once

#include "topology/plan/internal.h"

G_BEGIN_DECLS

/* The free cores of node index I under CAP (unused, with enough usable
 * PUs), ordered so that the first NEED fill the fewest cache domains: a
 * domain that holds them all (the smallest; a wholly free one on a tie),
 * else the domains with the most free cores first (wholly free first on a
 * tie) and the smallest that holds the rest; the same inside each chosen L3
 * for shared L2s. The other free cores follow in core order. A GArray of
 * guint core indexes. */
GArray *qp_plan_cache_order_cores(const Ctx *ctx, const Attempt *a, CapKind cap,
                                  guint i, guint need);

/* COUNT holds the units (per node index) an even split gives the K nodes
 * NODES; replaced by a split over the same nodes that fills fewer L3
 * domains, when there is one (whole domains first, the rest best fit). */
void qp_plan_cache_split_units(const Ctx *ctx, const Attempt *a, CapKind cap,
                               const guint *nodes, guint k, guint64 *count);

/* The CPUs N shared vCPUs of PLAN float over on node index I: the usable
 * CPUs of the L3 domain of the node (smaller than the node; a shared L2
 * would leave floating vCPUs too few CPUs) that has as many usable cores and
 * the fewest shared vCPUs per CPU once they are added (other VMs' load and
 * this plan's vCPUs placed so far; the smaller domain on a tie), with a
 * reason naming WHO. NULL (float over the node) when the host has no
 * domains, none holds N cores, or every one would carry more than one vCPU
 * per CPU. */
hwloc_bitmap_t qp_plan_cache_float_cpus(QpPlan *plan, const Ctx *ctx,
                                        const Attempt *a, guint i, guint n,
                                        const char *who);

/* Dies per guest socket that give the guest PLAN's L3 layout: SOCKETS
 * sockets of SOCKET vCPUs each (every vCPU placed), each socket's vCPUs in
 * D equal consecutive runs, each run inside a host L3 of its own, whole
 * cores of THREADS in each. QEMU 7.2 x86 shares the guest's L3 per die
 * (CPUID leaf 4, which Linux reads for Intel CPU models). 1 when there is no
 * such D > 1. */
guint qp_plan_cache_guest_dies(const QpPlan *plan, const QpHost *host,
                               guint sockets, guint socket, guint threads);

G_END_DECLS
