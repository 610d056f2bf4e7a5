/* The state directory: where the ledger (its lock, a record per VM, their
 * summary) and the host snapshot live (docs/ledger.md, "Files").
 *
 * This file owns it: which directory a user gets, whether a directory may
 * serve (private, or shared by a group with the sticky bit), the name of
 * every file in it, the one rule for temporary files (".NAME.tmp-PID" for
 * NAME, renamed over NAME once written) and the sweep of those a writer
 * that is gone left behind. The ledger (topology/ledger/) and the host
 * snapshot (topology/host/snapshot.c) open it, name its files and replace
 * them only through these. */
#pragma once

#include <glib.h>
#include <sys/stat.h>

#include "qp-error.h"

G_BEGIN_DECLS

/* The ledger's lock file, its summary, and the host snapshot (each user of
 * a shared directory has its own: qp_state_snapshot_name()). */
#define QP_STATE_LOCK "lock"
#define QP_STATE_SUMMARY ".summary"
#define QP_STATE_HOST_SNAPSHOT ".host-snapshot"

/* The state directory when none is configured: the host-wide SHARED
 * (/run/qemu-pin) for root and for every user that may write it (a member
 * of its group, mode 3770); else the user's own, $XDG_RUNTIME_DIR/qemu-pin
 * or /tmp/qemu-pin-UID, and *WARNING (when not NULL) one line naming
 * SHARED, why it is not usable and the fix. Root creates a missing SHARED
 * for GROUP ("": private) when GROUP exists. */
char *qp_state_dir_choose(const char *shared, const char *group,
                          char **warning);

/* qp_state_dir_choose() with /run/qemu-pin and the group qemu-pin was
 * built with (-Dledger_group). */
char *qp_state_dir_default(char **warning);

/* CONFIGURED (--state-dir, QEMU_PIN_STATE_DIR, the config) when set, else
 * qp_state_dir_default(); *WARNING as there (NULL when none). */
char *qp_state_dir_for(const char *configured, char **warning);

/* Whether DIR, of status ST (lstat), may hold a ledger: private (owned by
 * us, writable by us alone) or shared (owned by root or us, writable by its
 * group, with the sticky bit, so that each member unlinks and replaces only
 * its own files). FALSE with ERROR saying what is wrong and what is
 * expected. */
gboolean qp_state_dir_stat_ok(const char *dir, const struct stat *st,
                              GError **error);

/* Whether a directory that passed qp_state_dir_stat_ok() is shared: the
 * records of other users may be in it. */
gboolean qp_state_dir_is_shared(const struct stat *st);

/* DIR opened (O_DIRECTORY, symlinks refused) once the path and then the
 * descriptor pass qp_state_dir_stat_ok(); with CREATE made 0700 first when
 * missing. Its fstat() in *ST (may be NULL). -1 with ERROR otherwise. */
int qp_state_dir_open(const char *dir, gboolean create, struct stat *st,
                      GError **error);

/* "ID.json", the record of ID; "ID.json.corrupt", where an unreadable one
 * is set aside. */
char *qp_state_record_name(const char *id);
char *qp_state_corrupt_name(const char *id);

/* The host snapshot's name: in a SHARED directory each user has its own
 * (".host-snapshot-UID"), the only one it reads. */
char *qp_state_snapshot_name(gboolean shared);

/* The temporary file this process writes NAME through: ".NAME.tmp-PID"
 * (one leading dot of NAME dropped). */
char *qp_state_temp_name(const char *name);

typedef enum {
  QP_STATE_FILE_OTHER,   /* the lock, the summary, a snapshot, unknown */
  QP_STATE_FILE_RECORD,  /* ID.json */
  QP_STATE_FILE_CORRUPT, /* ID.json.corrupt */
  QP_STATE_FILE_TEMP,    /* a temporary file (qp_state_temp_name()) */
} QpStateFile;

/* What the file NAME of the directory is; for a record or a corrupt one,
 * the length of its id (the start of NAME) in *ID_LEN. */
QpStateFile qp_state_file_kind(const char *name, gsize *id_len);

/* Removes NAME, a temporary file, when the process that wrote it is gone.
 * TRUE when it was removed. */
gboolean qp_state_sweep_temp(int dirfd, const char *name);

/* Replaces NAME of DIRFD with the LEN bytes of TEXT through its temporary
 * file (qp_dir_file_replace(), which says the rest); the temporary file's
 * name in *TMP (may be NULL), for messages. */
gboolean qp_state_file_replace(int dirfd, const char *name, const char *text,
                               gsize len, mode_t mode, gboolean sync,
                               guint64 *ino, int *errsv, const char **step,
                               char **tmp);

/* ERROR (QP_TOPOLOGY_ERROR_LEDGER): "WHAT: strerror(ERRSV)", WHAT from
 * FMT. Returns FALSE. */
gboolean qp_state_errno_error(GError **error, int errsv, const char *fmt, ...)
    G_GNUC_PRINTF(3, 4);

G_END_DECLS
