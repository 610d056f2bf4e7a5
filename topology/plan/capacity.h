/* What each host node holds that no claim has: the one count of free
 * memory and CPUs that the planner, `qemu-pin status` and the keeper's
 * memory claims share. Pure functions of (host, claims, options). */
#pragma once

#include <glib.h>
#include <hwloc.h>

#include "topology/ledger/claims.h"
#include "topology/host/host.h"
#include "topology/plan/placement.h"

G_BEGIN_DECLS

/* Host reserve of node ID: its QpPlacementOptions.node_reserve entry if
 * any, else reserve_mib (0 when OPTS is NULL). */
guint64 qp_node_reserve_mib(const QpPlacementOptions *opts, int node);

/* Sums over CLAIMS (NULL: none) of what they hold on node NODE. */
guint64 qp_claims_node_mem_mib(const QpClaims *claims, int node);
guint64 qp_claims_node_huge_pages(const QpClaims *claims, int node,
                                  guint64 page_kib);
guint qp_claims_node_vcpus(const QpClaims *claims, int node);

/* Union of every claim's dedicated CPUs (a new bitmap). */
hwloc_bitmap_t qp_claims_dedicated(const QpClaims *claims);

/* Shared vCPUs per CPU that CLAIMS put on HOST: an array indexed like
 * host->cpus (free with g_free). A record without cpu_load spreads its
 * per-node load over the node's CPUs that no VM has dedicated. */
double *qp_claims_cpu_load(const QpHost *host, const QpClaims *claims);

/* Adds the shared vCPUs of one record CL to LOAD (indexed like host->cpus),
 * as qp_claims_cpu_load() counts them; DEDICATED: every VM's dedicated CPUs
 * (qp_claims_dedicated()). */
void qp_claim_add_cpu_load(const QpHost *host, const QpClaim *cl,
                           hwloc_const_bitmap_t dedicated, double *load);

/* TRUE when a corrupt record holds node ID whole. */
gboolean qp_claims_node_blocked(const QpClaims *claims, int node);

/* What claim C has resident on NODE as far as it is trusted: its
 * resident-mib there, at most its claim there, and over all its nodes at
 * most its QEMU's resident set (qemu_rss_mib). */
guint64 qp_claim_resident_mib(const QpClaim *c, int node);

/* Ordinary memory of one host node, in MiB. */
typedef struct {
  guint64 total_mib;    /* memory of the node */
  guint64 hugepage_mib; /* in hugepage pools: not for plain allocations */
  guint64 plain_mib;    /* total - hugepage pools, >= 0 */
  guint64 reserve_mib;  /* host reserve */
  guint64 claimed_mib;  /* claimed by VMs */
  guint64 room_mib;     /* plain - reserve - claimed, >= 0 */
  /* A live host's node (QpNode.measured), else all 0: */
  gboolean measured;
  guint64 can_give_mib;    /* what the kernel can give now */
  guint64 resident_mib;    /* of the claims, resident (trusted) */
  guint64 outstanding_mib; /* claimed - resident: not yet allocated */
  guint64 outside_mib;     /* used - resident: held by no claim, >= 0 */
  /* What a new claim can take: room, and on a measured node at most
   * can_give - outstanding (seed 003), >= 0. */
  guint64 uncommitted_mib;
} QpNodeMemory;

/* MiB of node N in its hugepage pools (every size, free or not). */
guint64 qp_node_hugepage_mib(const QpNode *n);

/* Fills OUT for host->nodes[INDEX] (a blocked node counts as it is). */
void qp_node_memory(const QpHost *host, const QpClaims *claims,
                    const QpPlacementOptions *opts, guint index,
                    QpNodeMemory *out);

/* MiB by which M's claims exceed its plain memory less the reserve (the
 * node is overcommitted: it shrank under them, or the reserve grew), 0
 * when they fit. `status` warns of it; a rebalance moves VMs off it. */
guint64 qp_node_memory_excess(const QpNodeMemory *m);

/* The same for every node, OUT[i] for host->nodes[i], in one pass over the
 * claims (the planner's start). */
void qp_nodes_memory(const QpHost *host, const QpClaims *claims,
                     const QpPlacementOptions *opts, QpNodeMemory *out);

/* Hugepages of one size on one host node. */
typedef struct {
  guint64 total;       /* pages in the pool (0: no pool) */
  guint64 free;        /* free now */
  guint64 claimed;     /* claimed by VMs */
  guint64 uncommitted; /* min(total - claimed, free), >= 0 */
} QpNodePages;

/* Fills OUT for pages of PAGE_KIB on host->nodes[INDEX] (a blocked node
 * counts as it is). */
void qp_node_pages(const QpHost *host, const QpClaims *claims, guint index,
                   guint64 page_kib, QpNodePages *out);

/* Units of PAGE_KIB memory (MiB when 0, else pages) host->nodes[INDEX]
 * holds that no claim has: 0 when the node is blocked. */
guint64 qp_node_uncommitted(const QpHost *host, const QpClaims *claims,
                            const QpPlacementOptions *opts, guint index,
                            guint64 page_kib);

/* Memory and CPUs of one host node as `qemu-pin status` shows them. */
typedef struct {
  int node; /* OS node id */
  guint64 total_mib;
  guint64 hugepage_mib; /* memory in hugepage pools (not for plain RAM) */
  guint64 reserve_mib;
  guint64 claimed_mib;
  guint64 uncommitted_mib; /* QpNodeMemory's; 0 if blocked */
  gboolean measured;       /* QpNodeMemory's, and its figures: */
  guint64 can_give_mib;
  guint64 outstanding_mib;
  guint64 outside_mib;
  gboolean blocked;         /* held whole by a corrupt record */
  hwloc_bitmap_t dedicated; /* dedicated CPUs of the node */
  guint shared_vcpus;       /* sum of shared load on the node */
  guint shared_cpus;        /* usable CPUs of the node not dedicated */
} QpNodeCapacity;

/* Fills OUT for host->nodes[INDEX]; free with qp_node_capacity_clear(). */
void qp_node_capacity(const QpHost *host, const QpClaims *claims,
                      const QpPlacementOptions *opts, guint index,
                      QpNodeCapacity *out);
void qp_node_capacity_clear(QpNodeCapacity *cap);

/* Page sizes (KiB, guint64) of node N's hugepage pools, then any other a
 * claim of CLAIMS (NULL: none) holds on N; free with g_array_unref(). */
GArray *qp_node_page_sizes(const QpNode *n, const QpClaims *claims);

G_END_DECLS
