/* The ledger's summary: every record of the state directory in one file
 * (DIR/.summary, QP_STATE_SUMMARY), one line per record (the record's line
 * form, topology/ledger/record.h) with the inode of the record file it was
 * made from, so that a read opens one file instead of one
 * per record.
 *
 * The records stay the truth. The summary is a cache: a line is used only
 * while the directory holds a record of that name with that inode (a record
 * is always replaced by rename, so any rewrite changes the inode); anything
 * else is read from the record file. A summary that does not parse, of
 * another format, or cut short (its last line counts and hashes the rest) is
 * ignored as a whole. It is written under the ledger's lock, by rename, and
 * not synced: a lost or stale summary costs a slower read, never a claim.
 * It may lag a few records behind the directory (read from their files
 * until it is written again), never a removal.
 * See docs/ledger.md, "Summary". */
#pragma once

#include <glib.h>

#include "topology/ledger/record.h"

G_BEGIN_DECLS

typedef struct QpSummary QpSummary;

/* Reads DIRFD's summary: an empty summary when there is none or it does not
 * parse (the caller cannot tell, and need not). In a SHARED ledger only a
 * summary written by root or by this user is read: another member of the
 * group may claim room, not speak for the records it cannot write. */
QpSummary *qp_summary_load(int dirfd, gboolean shared);
void qp_summary_free(QpSummary *summary);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QpSummary, qp_summary_free)

/* The inode of the summary file it was loaded from (0: none). */
guint64 qp_summary_file_ino(const QpSummary *summary);

/* The claim of record ID if the summary has it from inode INO: a new copy
 * (NULL otherwise, or when its line does not parse). */
QpClaim *qp_summary_claim(QpSummary *summary, const char *id, guint64 ino);

/* Liveness of record ID at inode INO found before the lock was taken:
 * 1 live, 0 gone, -1 not known. */
int qp_summary_liveness(const QpSummary *summary, const char *id, guint64 ino);

/* The uid that owns record ID's file at inode INO (-1: not known). */
gint64 qp_summary_owner(const QpSummary *summary, const char *id, guint64 ino);

/* Whether record ID at inode INO counts in a shared ledger, as judged
 * before (topology/ledger/trust.h): NULL not judged, "" it counts, else
 * why not. The verdict holds for the record's lifetime: the inode names
 * its text, and liveness the process it was judged by. */
const char *qp_summary_verdict(const QpSummary *summary, const char *id,
                               guint64 ino);
void qp_summary_set_verdict(QpSummary *summary, const char *id, guint64 ino,
                            const char *verdict);

/* Keeps the verdicts (and parsed claims) of FROM for the records SUMMARY
 * has from the same inodes with the same lines. */
void qp_summary_take_liveness(QpSummary *summary, QpSummary *from);

/* Judges a live record CLAIM whose file OWNER owns (-1: not known): a
 * verdict as qp_summary_verdict() gives it (a new string), NULL when it
 * needs none. */
typedef char *(*QpSummaryJudge)(const QpClaim *claim, gint64 owner,
                                gpointer data);

/* Checks the liveness of every record SUMMARY has, with LIVE (no lock
 * needed: a process gone stays gone, and a live verdict only keeps a
 * claim one critical section longer); LIVE may note on the claim what it
 * read (QEMU's resident set). JUDGE (NULL: none) judges the live ones not
 * judged yet. */
void qp_summary_check_all(QpSummary *summary, gboolean (*live)(QpClaim *claim),
                          QpSummaryJudge judge, gpointer data);

/* Sets record ID to CLAIM read from inode INO owned by uid OWNER (-1: not
 * known), or drops it (CLAIM NULL). */
void qp_summary_set(QpSummary *summary, const char *id, guint64 ino,
                    gint64 owner, const QpClaim *claim);
void qp_summary_drop(QpSummary *summary, const char *id);

/* Drops every record whose id KEEP (a set of ids) lacks. */
void qp_summary_retain(QpSummary *summary, GHashTable *keep);

/* TRUE when the summary should be written: a record was dropped (so that
 * no line outlives its record file), or enough
 * records were set since it was loaded that reading their files costs more
 * than writing it. */
gboolean qp_summary_needs_save(const QpSummary *summary);

/* Writes the summary to DIRFD (through its temporary file, renamed),
 * readable by the group when SHARED. */
gboolean qp_summary_save(QpSummary *summary, int dirfd, gboolean shared,
                         GError **error);

G_END_DECLS
