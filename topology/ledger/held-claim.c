/* The claim a VM holds, with its one owner (see ledger.h), and the other
 * way in to the ledger: reading its live records. Every function here is
 * one critical section on the store (ledger-store.h), which no other file
 * of qemu-pin takes. */
#include "topology/base/state-dir.h"
#include "topology/ledger/store.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

struct QpHeldClaim {
  char *dir;      /* the ledger's state directory */
  QpClaim *claim; /* what the record says, or is about to */
};

/* What a critical section does with the live records, the lock held. */
typedef gboolean (*SectionFunc)(QpLedger *ledger, const QpClaims *claims,
                                gpointer data, GError **error);

/* Opens the ledger at DIR, locks it, reads its live records (pruning the
 * stale: every one with PRUNE_ALL, else this user's; HOST as for
 * qp_ledger_read()), runs RUN (NULL: none) on them, and
 * unlocks. Returns the records read, or NULL when a step failed. The
 * ledger is open only for this: a QpLedger must not live across fork(). */
static QpClaims *
section_pruning(const char *dir, const QpHost *host, gboolean prune_all,
                SectionFunc run, gpointer data, GError **error)
{
  g_autoptr(QpLedger) ledger = qp_ledger_open(dir, error);
  if (ledger == NULL)
    return NULL;
  qp_ledger_prescan(ledger, host);
  if (!qp_ledger_lock(ledger, error))
    return NULL;
  qp_ledger_set_prune_all(ledger, prune_all);
  g_autoptr(QpClaims) claims = qp_ledger_read(ledger, host, error);
  if (claims != NULL && run != NULL && !run(ledger, claims, data, error))
    g_clear_pointer(&claims, qp_claims_free);
  qp_ledger_unlock(ledger);
  return g_steal_pointer(&claims);
}

/* A critical section that prunes only this user's stale records. */
static QpClaims *
critical_section(const char *dir, const QpHost *host, SectionFunc run,
                 gpointer data, GError **error)
{
  return section_pruning(dir, host, FALSE, run, data, error);
}

QpClaims *
qp_ledger_prune_claims(const char *dir, const QpHost *host, GError **error)
{
  return section_pruning(dir, host, TRUE, NULL, NULL, error);
}

QpClaims *
qp_ledger_read_claims(const char *dir, const QpHost *host, GError **error)
{
  /* No ledger yet (no VM launched, or a mistyped --state-dir): no claim,
   * and a reader (status, move, rebalance) makes no directory. */
  struct stat st;
  if (lstat(dir, &st) < 0 && errno == ENOENT)
    return qp_claims_new();
  return critical_section(dir, host, NULL, NULL, error);
}

static QpHeldClaim *
held_new(const char *dir, QpClaim *claim)
{
  QpHeldClaim *held = g_new0(QpHeldClaim, 1);
  held->dir = g_strdup(dir);
  held->claim = claim;
  return held;
}

void
qp_held_claim_free(QpHeldClaim *held)
{
  if (held == NULL)
    return;
  g_free(held->dir);
  qp_claim_free(held->claim);
  g_free(held);
}

const QpClaim *
qp_held_claim_get(const QpHeldClaim *held)
{
  return held->claim;
}

typedef struct {
  QpClaimMakeFunc make;
  gpointer data;
  QpClaim *claim; /* out */
} Take;

static gboolean
make_and_write(QpLedger *ledger, const QpClaims *claims, gpointer data,
               GError **error)
{
  Take *t = data;
  t->claim = t->make(claims, t->data, error);
  return t->claim != NULL && qp_ledger_write(ledger, t->claim, error);
}

QpHeldClaim *
qp_held_claim_take(const char *dir, const QpHost *host, QpClaimMakeFunc make,
                   gpointer data, GError **error)
{
  Take t = {make, data, NULL};
  g_autoptr(QpClaims) claims =
      critical_section(dir, host, make_and_write, &t, error);
  if (claims == NULL) {
    g_clear_pointer(&t.claim, qp_claim_free);
    return NULL;
  }
  return held_new(dir, t.claim);
}

QpHeldClaim *
qp_held_claim_adopt(const char *dir, const QpClaim *claim)
{
  QpHeldClaim *held = held_new(dir, qp_claim_copy(claim));
  held->claim->keeper_pid = getpid();
  return held;
}

typedef struct {
  QpClaim *claim;
  QpClaimEditFunc edit;
  gpointer data;
} Adjust;

static gboolean
edit_and_write(QpLedger *ledger, const QpClaims *claims, gpointer data,
               GError **error)
{
  Adjust *a = data;
  return (a->edit == NULL || a->edit(a->claim, claims, a->data, error)) &&
         qp_ledger_write(ledger, a->claim, error);
}

gboolean
qp_held_claim_adjust(QpHeldClaim *held, QpClaimEditFunc edit, gpointer data,
                     GError **error)
{
  Adjust a = {held->claim, edit, data};
  g_autoptr(QpClaims) claims =
      critical_section(held->dir, NULL, edit_and_write, &a, error);
  return claims != NULL;
}

void
qp_held_claim_amend(QpHeldClaim *held, QpClaimEditFunc edit, gpointer data)
{
  edit(held->claim, NULL, data, NULL);
}

gboolean
qp_held_claim_set_qemu(QpHeldClaim *held, int pid, GError **error)
{
  held->claim->qemu_pid = pid;
  held->claim->qemu_start = qp_proc_start_time(pid);
  held->claim->launcher_pid = 0;
  held->claim->launcher_start = 0;
  return qp_held_claim_adjust(held, NULL, NULL, error);
}

gboolean
qp_held_claim_restore(QpHeldClaim *held, gboolean *restored, GError **error)
{
  *restored = FALSE;
  g_autofree char *name = qp_state_record_name(held->claim->id);
  g_autofree char *path = g_build_filename(held->dir, name, NULL);
  struct stat st;
  if (lstat(path, &st) == 0 || errno != ENOENT)
    return TRUE;
  *restored = qp_held_claim_adjust(held, NULL, NULL, error);
  return *restored;
}

gboolean
qp_held_claim_release(QpHeldClaim *held, GError **error)
{
  g_autoptr(QpLedger) ledger = qp_ledger_open(held->dir, error);
  return ledger != NULL && qp_ledger_remove(ledger, held->claim->id, error);
}
