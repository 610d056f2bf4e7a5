/* The ledger: one JSON record per VM in the state directory, an exclusive
 * flock around "read ledger, plan, write record", liveness by QEMU PID and
 * its start time (docs/ledger.md). What the rest of qemu-pin uses of it:
 * the claim a VM holds, the live records, and the record's forms
 * (record.h). The files behind it: held-claim.c (every critical section),
 * store.c (the lock, the records, the reading), summary.c, salvage.c,
 * record.c and claims.c. The ledger uses topology/base/ and reads the host
 * model's data (host.h) to salvage records; it calls nothing of the host
 * model or the planner (tests/ledger links it with base alone). */
#pragma once

#include <glib.h>

#include "topology/base/proc.h"
#include "topology/base/state-dir.h"
#include "topology/host/host.h"
#include "topology/ledger/claims.h"
#include "topology/ledger/record.h"

G_BEGIN_DECLS

/* The live records of the ledger at DIR (`qemu-pin status`), read in a
 * critical section of its own: stale records are pruned, unreadable ones
 * set aside with their nodes blocked (HOST maps their CPUs to nodes). */
QpClaims *qp_ledger_read_claims(const char *dir, const QpHost *host,
                                GError **error);

/* The same, removing every stale record on the way, whoever owns it (as
 * far as this user may: root may remove any; `qemu-pin status --prune`). */
QpClaims *qp_ledger_prune_claims(const char *dir, const QpHost *host,
                                 GError **error);

/* ---- The claim a VM holds ------------------------------------------------
 *
 * One owner per process for a VM's record: the launcher takes the claim,
 * the keeper adopts it after fork() and holds it for the VM's lifetime,
 * and whoever ends it releases it. Every change is one critical section
 * inside: open the ledger, lock, read the live records (pruning the
 * stale), change, write atomically, unlock. No other file takes the lock.
 */
typedef struct QpHeldClaim QpHeldClaim;

/* Makes the claim to take from CLAIMS, the ledger's live records, while
 * the ledger is locked (the launcher plans here). NULL with ERROR: nothing
 * is written. */
typedef QpClaim *(*QpClaimMakeFunc)(const QpClaims *claims, gpointer data,
                                    GError **error);

/* Takes a claim in the ledger at DIR: MAKE's claim, written in the
 * critical section that read the records MAKE saw. HOST serves only to
 * read them (see qp_ledger_read_claims()): MAKE may free it. */
QpHeldClaim *qp_held_claim_take(const char *dir, const QpHost *host,
                                QpClaimMakeFunc make, gpointer data,
                                GError **error);

/* The claim another process of the VM took in the ledger at DIR, held by
 * this one from now on (the keeper, after fork()): a copy of CLAIM whose
 * keeper-pid is this process. */
QpHeldClaim *qp_held_claim_adopt(const char *dir, const QpClaim *claim);

/* Forgets HELD in this process; its record stays as it is. */
void qp_held_claim_free(QpHeldClaim *held);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QpHeldClaim, qp_held_claim_free)

const QpClaim *qp_held_claim_get(const QpHeldClaim *held);

/* Changes CLAIM: EDIT (may change CLAIM) sees every live record, CLAIM's
 * own included. */
typedef gboolean (*QpClaimEditFunc)(QpClaim *claim, const QpClaims *claims,
                                    gpointer data, GError **error);

/* Changes the held claim and its record in one critical section: EDIT
 * (NULL: none), then the record is written. When EDIT fails, or the write,
 * the record stays as it was while the claim keeps what EDIT changed, so
 * that the next write carries it; what must not be kept is taken back with
 * qp_held_claim_amend(). */
gboolean qp_held_claim_adjust(QpHeldClaim *held, QpClaimEditFunc edit,
                              gpointer data, GError **error);

/* Changes the held claim without writing its record (EDIT sees no records:
 * CLAIMS is NULL, and must not fail): what the VM gave back, written with
 * the next qp_held_claim_adjust(), or what a failed write must not keep. */
void qp_held_claim_amend(QpHeldClaim *held, QpClaimEditFunc edit,
                         gpointer data);

/* QEMU is PID (after -daemonize): from now on its start time keeps the
 * record alive, no longer the launcher's. */
gboolean qp_held_claim_set_qemu(QpHeldClaim *held, int pid, GError **error);

/* Writes the record again if it is gone (its file, or the whole state
 * directory, removed by hand while the VM runs): the claim holds as long
 * as the VM lives. *RESTORED says whether it was written. FALSE when it
 * was gone and could not be written. */
gboolean qp_held_claim_restore(QpHeldClaim *held, gboolean *restored,
                               GError **error);

/* Ends the claim: removes its record. */
gboolean qp_held_claim_release(QpHeldClaim *held, GError **error);

/* A new unique record id. */
char *qp_ledger_new_id(void);

G_END_DECLS
