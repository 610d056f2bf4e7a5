/* The ledger's store: the state directory, its lock file and one record
 * file per VM (docs/ledger.md). The ledger module
 * (topology/ledger/held-claim.c) runs every critical section through these; the
 * rest of qemu-pin uses topology/ledger/ledger.h and never takes the lock
 * itself. Tests of the store use it directly. */
#pragma once

#include <glib.h>
#include <sys/stat.h>

#include "topology/ledger/ledger.h"

G_BEGIN_DECLS

typedef struct QpLedger QpLedger;

/* Opens (creating 0700 if needed) the state directory DIR and its lock
 * file: DIR private or shared as qp_state_dir_open() checks it. */
QpLedger *qp_ledger_open(const char *dir, GError **error);

void qp_ledger_close(QpLedger *ledger);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QpLedger, qp_ledger_close)

const char *qp_ledger_dir(const QpLedger *ledger);

/* Exclusive lock of the whole ledger (blocking). */
gboolean qp_ledger_lock(QpLedger *ledger, GError **error);
void qp_ledger_unlock(QpLedger *ledger);

/* TRUE while this handle holds the lock. A QpLedger must not be used across
 * fork(): flock belongs to the open file, so a child must open its own. */
gboolean qp_ledger_is_locked(const QpLedger *ledger);

/* Whether reading removes every stale record (root's prune) or only this
 * user's own (the default: the others are skipped). */
void qp_ledger_set_prune_all(QpLedger *ledger, gboolean prune_all);

/* Reads every record; must hold the lock. Stale records (process gone or
 * start time differs) are removed; unparsable ones are renamed *.corrupt and
 * reported in warnings with their nodes blocked; in a shared ledger a
 * member's record that claims more than a QEMU of its own holds goes to
 * the ignored records (removed by a prune of every record). */
QpClaims *qp_ledger_read(QpLedger *ledger, const QpHost *host, GError **error);

/* Optional, before qp_ledger_lock(): reads the ledger's summary and checks
 * whether the VMs it names are still there (and in a shared ledger whether
 * they count, HOST as for qp_ledger_read()), so that the read under the
 * lock only checks what changed since (docs/ledger.md, "Summary"). */
void qp_ledger_prescan(QpLedger *ledger, const QpHost *host);

/* Writes CLAIM atomically (temp file, fsync, rename, fsync dir). Must hold the
 * lock. CLAIM->id names the record. */
gboolean qp_ledger_write(QpLedger *ledger, const QpClaim *claim,
                         GError **error);

/* Removes the record ID (taking the lock itself). Missing is not an error. */
gboolean qp_ledger_remove(QpLedger *ledger, const char *id, GError **error);

/* An unreadable record at PATH: blocks in CLAIMS the nodes its TEXT still
 * names (NULL: it could not be read), or every node of HOST when it does
 * not say, with a warning (topology/ledger/salvage.c). */
void qp_ledger_block_unreadable(QpClaims *claims, const char *path,
                                const char *text, const QpHost *host);

G_END_DECLS
