/* The ledger: one JSON record per VM in a state directory, an exclusive
 * flock around "read ledger, plan, write record", liveness by QEMU PID and
 * its start time. See docs/ledger.md. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "topology/host.h"
#include "topology/plan.h"

G_BEGIN_DECLS

/* Default state directory: /run/qemu-pin for root,
 * $XDG_RUNTIME_DIR/qemu-pin otherwise. */
char *qp_ledger_default_dir(void);

/* Changes CLAIM in the ledger: EDIT (may change CLAIM) sees every live
 * record, CLAIM's own included; returning FALSE leaves the record as it was.
 * Called with the lock held and the records just read. */
typedef gboolean (*QpClaimEditFunc)(QpClaim *claim, const QpClaims *claims,
                                    gpointer data, GError **error);

/* Rewrites the record of CLAIM in the ledger at DIR in one critical section
 * of its own: open, lock, read (pruning stale records), EDIT (NULL: none),
 * write atomically, unlock. For a process that holds a claim for a long
 * time (the keeper) and must not keep the ledger open across fork(). */
gboolean qp_ledger_rewrite(const char *dir, QpClaim *claim,
                           QpClaimEditFunc edit, gpointer data, GError **error);

/* A new unique record id. */
char *qp_ledger_new_id(void);

/* TRUE if ID can name a record: letters, digits, '-', '_' and '.' (not
 * leading), at most 128 characters. */
gboolean qp_claim_id_is_valid(const char *id);

/* A claim for PLAN (memory, hugepages, dedicated CPUs, load). PIDs are filled
 * by the caller. */
QpClaim *qp_claim_from_plan(const QpPlan *plan, const char *id,
                            const char *name);

/* JSON form of a record, and back. */
char *qp_claim_to_json(const QpClaim *claim);
QpClaim *qp_claim_from_json(const char *text, gsize len, GError **error);

/* Start time (field 22 of /proc/PID/stat) of PID, 0 if it is gone. */
guint64 qp_proc_start_time(int pid);

/* `qemu-pin status`: per node totals and the VMs holding claims. */
JsonNode *qp_status_to_json(const QpHost *host, const QpClaims *claims,
                            const QpPlacementOptions *opts);
char *qp_status_to_text(const QpHost *host, const QpClaims *claims,
                        const QpPlacementOptions *opts);

/* ---- Additions (ledger helper) ----------------------------------------- */

/* Host reserve of node ID: its QpPlacementOptions.node_reserve entry if
 * any, else reserve_mib (0 when OPTS is NULL). */
guint64 qp_node_reserve_mib(const QpPlacementOptions *opts, int node);

/* Sums over CLAIMS of what they hold on node NODE. */
guint64 qp_claims_node_mem_mib(const QpClaims *claims, int node);
guint64 qp_claims_node_huge_pages(const QpClaims *claims, int node,
                                  guint64 page_kib);
guint qp_claims_node_vcpus(const QpClaims *claims, int node);

/* Union of every claim's dedicated CPUs (a new bitmap). */
hwloc_bitmap_t qp_claims_dedicated(const QpClaims *claims);

/* Memory and CPUs of one host node as the ledger sees them (for status;
 * the planner computes its own). */
typedef struct {
  int node; /* OS node id */
  guint64 total_mib;
  guint64 hugepage_mib; /* memory in hugepage pools (not for plain RAM) */
  guint64 reserve_mib;
  guint64 claimed_mib;
  guint64 uncommitted_mib;  /* total - hugepage pools - reserve - claimed,
                               >= 0; 0 if blocked (as the planner counts) */
  gboolean blocked;         /* held whole by a corrupt record */
  hwloc_bitmap_t dedicated; /* dedicated CPUs of the node */
  guint shared_vcpus;       /* sum of shared load on the node */
  guint shared_cpus;        /* usable CPUs of the node not dedicated */
} QpNodeCapacity;

/* Pages of PAGE_KIB on host->nodes[INDEX] that no claim holds: the pool's
 * free pages less the claimed ones (0 when blocked), as the planner counts
 * them. */
guint64 qp_node_huge_uncommitted(const QpHost *host, const QpClaims *claims,
                                 guint index, guint64 page_kib);

/* Fills OUT for host->nodes[INDEX]; free with qp_node_capacity_clear(). */
void qp_node_capacity(const QpHost *host, const QpClaims *claims,
                      const QpPlacementOptions *opts, guint index,
                      QpNodeCapacity *out);
void qp_node_capacity_clear(QpNodeCapacity *cap);

G_END_DECLS
