/* The ledger: one JSON record per VM in a state directory, an exclusive
 * flock around "read ledger, plan, write record", liveness by QEMU PID and
 * its start time. See docs/ledger.md. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "topology/host.h"
#include "topology/plan.h"

G_BEGIN_DECLS

typedef struct QpLedger QpLedger;

/* Default state directory: /run/qemu-pin for root,
 * $XDG_RUNTIME_DIR/qemu-pin otherwise. */
char *qp_ledger_default_dir(void);

/* Opens (creating 0700 if needed) DIR. A symlink, a non-directory or a
 * directory owned by another user is an error. */
QpLedger *qp_ledger_open(const char *dir, GError **error);
void qp_ledger_close(QpLedger *ledger);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QpLedger, qp_ledger_close)

const char *qp_ledger_dir(const QpLedger *ledger);

/* Exclusive lock of the whole ledger (blocking). */
gboolean qp_ledger_lock(QpLedger *ledger, GError **error);
void qp_ledger_unlock(QpLedger *ledger);

/* Reads every record; must hold the lock. Stale records (process gone or
 * start time differs) are removed; unparsable ones are renamed *.corrupt and
 * reported in warnings with their nodes blocked. */
QpClaims *qp_ledger_read(QpLedger *ledger, const QpHost *host, GError **error);

/* Writes CLAIM atomically (temp file, fsync, rename, fsync dir). Must hold the
 * lock. CLAIM->id names the record. */
gboolean qp_ledger_write(QpLedger *ledger, const QpClaim *claim,
                         GError **error);

/* Removes the record ID (taking the lock itself). Missing is not an error. */
gboolean qp_ledger_remove(QpLedger *ledger, const char *id, GError **error);

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

/* A claim for PLAN (memory, hugepages, dedicated CPUs, load). PIDs are filled
 * by the caller. */
QpClaim *qp_claim_from_plan(const QpPlan *plan, const char *id,
                            const char *name);

/* JSON form of a record, and back. */
char *qp_claim_to_json(const QpClaim *claim);
QpClaim *qp_claim_from_json(const char *text, gsize len, GError **error);

/* Start time (field 22 of /proc/PID/stat) of PID, 0 if it is gone. */
guint64 qp_proc_start_time(int pid);

/* ---- Additions (ledger helper) ----------------------------------------- */

/* TRUE while this handle holds the lock. A QpLedger must not be used across
 * fork(): flock belongs to the open file, so a child must open its own. */
gboolean qp_ledger_is_locked(const QpLedger *ledger);

G_END_DECLS
