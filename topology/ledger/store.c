/* The ledger's store (see ledger-store.h): one JSON record per VM in a
 * private state directory, exclusive flocks on DIR and DIR/lock, records
 * written atomically, and on every read the records of VMs that are gone pruned
 * (liveness by the QEMU PID and its start time) and unreadable ones moved
 * aside. See docs/ledger.md.
 *
 * Every file operation is relative to the directory fd opened once in
 * qp_ledger_open() (openat/renameat/unlinkat), so nothing can swap a path
 * component under us after the directory was checked. */
#include "topology/ledger/store.h"

#include "topology/base/accounts.h"
#include "topology/base/dir-file.h"
#include "topology/base/proc.h"
#include "topology/base/state-dir.h"
#include "topology/ledger/summary.h"
#include "topology/ledger/trust.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <dirent.h>
#include <unistd.h>

#define RECORD_MAX_BYTES (1024 * 1024)

struct QpLedger {
  char *dir;
  int dirfd;
  int lockfd;
  gboolean locked;
  pid_t owner;     /* the process that opened it: flock is per open file, so a
                      forked child must neither use nor unlock it */
  gboolean shared; /* a group's ledger: records of other users in it */
  gboolean prune_all;  /* reading removes every stale record, not only ours */
  QpSummary *prescan;  /* the summary as read before the lock, or NULL */
  guint64 prescan_gen; /* the summary's generation before it was read */
  QpSummary *summary;  /* the summary as read under the lock, or NULL */
  const QpHost *host;  /* while reading: maps dedicated CPUs to cores */
};

/* ---- Small helpers ------------------------------------------------------- */

static gboolean
fsync_dir(QpLedger *ledger, GError **error)
{
  if (fsync(ledger->dirfd) < 0 && errno != EINVAL)
    return qp_state_errno_error(error, errno, "cannot sync state directory %s",
                                ledger->dir);
  return TRUE;
}

/* ---- Liveness ----------------------------------------------------------- */

static gboolean
process_is(int pid, guint64 start, guint64 *rss_kib)
{
  return pid > 0 && start != 0 && qp_proc_start_and_rss(pid, rss_kib) == start;
}

/* A record is live while its QEMU, or the qemu-pin that waits for a
 * -daemonize QEMU, is the process it names (PID and start time): a gone
 * process or a zombie holds nothing. The same read of QEMU's stat gives
 * its resident set, the most the record's resident-mib is trusted for. */
static gboolean
claim_is_live(QpClaim *c)
{
  guint64 rss_kib = 0;
  gboolean qemu = process_is(c->qemu_pid, c->qemu_start, &rss_kib);
  c->qemu_rss_mib = qemu ? rss_kib / 1024 : 0;
  return qemu || process_is(c->launcher_pid, c->launcher_start, NULL);
}

/* Whether the live record C, whose file OWNER owns, counts (a
 * QpSummaryJudge): in a shared ledger root's records count, another
 * owner's only for a QEMU of its own, up to what its command line asks
 * (trust.h). NULL (no verdict needed) in a private ledger and for root's. */
static char *
judge_record(const QpClaim *c, gint64 owner, gpointer data)
{
  QpLedger *ledger = data;
  if (!ledger->shared || owner == 0)
    return NULL;
  if (owner < 0)
    return g_strdup("its file's owner is not known");
  char *why = qp_record_distrust(c, (guint)owner, ledger->host);
  return why != NULL ? why : g_strdup("");
}

/* ---- Opening -------------------------------------------------------------
 */

/* A lock file just made in a shared directory (DIRST its stat) must have
 * the directory's group: at mode 0660 any other group keeps every other
 * member out of it, and so out of the ledger, until reboot. A setgid
 * directory (3770, as the tmpfiles.d entry makes it) gave it that group;
 * else fchown, and a lock file that cannot have it is removed again. */
static gboolean
lock_has_dir_group(int dirfd, int fd, const char *dir, const struct stat *dirst,
                   GError **error)
{
  struct stat st;
  if ((fstat(fd, &st) == 0 && st.st_gid == dirst->st_gid) ||
      fchown(fd, (uid_t)-1, dirst->st_gid) == 0)
    return TRUE;
  int errsv = errno;
  (void)unlinkat(dirfd, QP_STATE_LOCK, 0);
  g_autofree char *group = qp_group_label(dirst->st_gid);
  g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LEDGER,
              "cannot give lock file %s/%s the group %s of its directory: "
              "%s; make %s setgid (mode 3770, as qemu-pin's tmpfiles.d "
              "entry does)",
              dir, QP_STATE_LOCK, group, g_strerror(errsv), dir);
  return FALSE;
}

/* The lock file of DIR (DIRFD, DIRST its stat): created 0600 in a private
 * directory, 0660 for the group in a shared one whoever comes first,
 * whatever the umask. Only flock is taken on it, for which reading is
 * enough. */
static int
open_lock(int dirfd, const char *dir, const struct stat *dirst, gboolean shared,
          GError **error)
{
  /* O_NONBLOCK: a FIFO named like the lock file does not hold the open
   * (it is refused below); flock() on the file ignores it. */
  const int flags = O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
  mode_t mode = shared ? 0660 : 0600;
  for (int attempt = 0; attempt < 3; attempt++) {
    int fd = openat(dirfd, QP_STATE_LOCK, O_RDWR | flags);
    if (fd < 0 && errno == EACCES && shared)
      fd = openat(dirfd, QP_STATE_LOCK, O_RDONLY | flags);
    if (fd >= 0)
      return fd;
    if (errno != ENOENT)
      break;
    /* Not O_CREAT on an existing file: protected_regular refuses that
     * in a sticky directory when another user owns it. */
    fd = openat(dirfd, QP_STATE_LOCK, O_RDWR | O_CREAT | O_EXCL | flags, mode);
    if (fd >= 0) {
      if (shared && !lock_has_dir_group(dirfd, fd, dir, dirst, error)) {
        close(fd);
        return -1;
      }
      (void)fchmod(fd, mode);
      return fd;
    }
    if (errno != EEXIST)
      break;
  }
  qp_state_errno_error(error, errno, "cannot open lock file %s/%s", dir,
                       QP_STATE_LOCK);
  return -1;
}

QpLedger *
qp_ledger_open(const char *dir, GError **error)
{
  g_return_val_if_fail(dir != NULL, NULL);
  struct stat st;
  int dirfd = qp_state_dir_open(dir, TRUE, &st, error);
  if (dirfd < 0)
    return NULL;

  gboolean shared = qp_state_dir_is_shared(&st);
  int lockfd = open_lock(dirfd, dir, &st, shared, error);
  if (lockfd < 0) {
    close(dirfd);
    return NULL;
  }
  if (fstat(lockfd, &st) < 0 || !S_ISREG(st.st_mode) ||
      (!shared && st.st_uid != geteuid())) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LEDGER,
                "lock file %s/%s is not a regular file owned by uid %u", dir,
                QP_STATE_LOCK, (unsigned)geteuid());
    close(lockfd);
    close(dirfd);
    return NULL;
  }

  QpLedger *ledger = g_new0(QpLedger, 1);
  ledger->dir = g_strdup(dir);
  ledger->dirfd = dirfd;
  ledger->lockfd = lockfd;
  ledger->shared = shared;
  ledger->owner = getpid();
  return ledger;
}

void
qp_ledger_close(QpLedger *ledger)
{
  if (ledger == NULL)
    return;
  qp_summary_free(ledger->prescan);
  qp_summary_free(ledger->summary);
  /* In a forked child, closing our copies leaves the parent's lock alone;
   * LOCK_UN would release it for both. */
  if (ledger->locked && ledger->owner == getpid())
    qp_ledger_unlock(ledger);
  close(ledger->lockfd);
  close(ledger->dirfd);
  g_free(ledger->dir);
  g_free(ledger);
}

const char *
qp_ledger_dir(const QpLedger *ledger)
{
  return ledger->dir;
}

static gboolean
require_owner(QpLedger *ledger, GError **error)
{
  if (ledger->owner == getpid())
    return TRUE;
  g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LEDGER,
              "ledger %s was opened by process %d and used by process %d "
              "after fork; open it again in this process",
              ledger->dir, (int)ledger->owner, (int)getpid());
  return FALSE;
}

/* The longest wait for the ledger's lock. */
#define LOCK_WAIT_S 60

/* Takes an exclusive flock on FD, WHAT in messages ("the ledger's lock
 * ..."), waiting up to WAIT_S (see qp_ledger_lock()). */
static gboolean
lock_waiting(int fd, const char *what, int wait_s, GError **error)
{
  gint64 deadline = g_get_monotonic_time() + wait_s * G_USEC_PER_SEC;
  gulong nap_us = 200;
  while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
    if (errno == EINTR)
      continue;
    if (errno != EWOULDBLOCK)
      return qp_state_errno_error(error, errno, "cannot take %s", what);
    if (g_get_monotonic_time() >= deadline) {
      g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LEDGER,
                  "%s has been held by another process for %d s (one "
                  "stopped or hung while it held it? fuser shows it)",
                  what, wait_s);
      return FALSE;
    }
    g_usleep(nap_us);
    nap_us = MIN(nap_us * 2, 5000);
  }
  return TRUE;
}

gboolean
qp_ledger_lock(QpLedger *ledger, GError **error)
{
  if (!require_owner(ledger, error))
    return FALSE;
  /* Critical sections last milliseconds: the lock is waited for, a few
   * ms at a time, up to LOCK_WAIT_S, after which its holder is most
   * likely stopped or hung (a launch then fails, saying so, rather than
   * hang with it). */
  /* (The tests of the wait set it shorter.) */
  const char *test_wait = g_getenv("QEMU_PIN_TEST_LOCK_WAIT_S");
  int wait_s = test_wait != NULL ? atoi(test_wait) : LOCK_WAIT_S;
  /* The directory first: a lock file removed (by hand, by a member of a
   * shared ledger's group) while its holder is inside its critical
   * section is made again by the next opener, whose flock on the new file
   * would not wait for the holder's on the old one; removing the lock
   * file leaves the directory as it was. The lock file still, for the
   * keepers of older qemu-pins, which lock it alone. */
  g_autofree char *on_dir =
      g_strdup_printf("the ledger's lock on %s", ledger->dir);
  if (!lock_waiting(ledger->dirfd, on_dir, wait_s, error))
    return FALSE;
  g_autofree char *on_file =
      g_strdup_printf("the ledger's lock %s/%s", ledger->dir, QP_STATE_LOCK);
  if (!lock_waiting(ledger->lockfd, on_file, wait_s, error)) {
    while (flock(ledger->dirfd, LOCK_UN) < 0 && errno == EINTR)
      ;
    return FALSE;
  }
  ledger->locked = TRUE;
  return TRUE;
}

/* The summary's generation: 8 bytes at the start of the lock file, which
 * every critical section that rewrites the summary increments after it,
 * so that a read under the lock knows whether the summary it read before
 * the lock is still the one on disk. */
static guint64
summary_generation(QpLedger *ledger)
{
  guint64 gen = 0;
  if (pread(ledger->lockfd, &gen, sizeof gen, 0) != (ssize_t)sizeof gen)
    return 0;
  return gen;
}

void
qp_ledger_unlock(QpLedger *ledger)
{
  if (ledger->owner != getpid())
    return; /* the parent's lock, not ours to release */
  /* The summary as this critical section left the records; failing to
   * write it costs the next reader time, not a claim. */
  if (ledger->locked && ledger->summary != NULL &&
      qp_summary_needs_save(ledger->summary) &&
      qp_summary_save(ledger->summary, ledger->dirfd, ledger->shared, NULL)) {
    guint64 gen = summary_generation(ledger) + 1;
    (void)!pwrite(ledger->lockfd, &gen, sizeof gen, 0);
  }
  while (flock(ledger->lockfd, LOCK_UN) < 0 && errno == EINTR)
    ;
  while (flock(ledger->dirfd, LOCK_UN) < 0 && errno == EINTR)
    ;
  ledger->locked = FALSE;
  g_clear_pointer(&ledger->summary, qp_summary_free); /* after: not held */
}

gboolean
qp_ledger_is_locked(const QpLedger *ledger)
{
  return ledger->locked && ledger->owner == getpid();
}

static gboolean
require_lock(QpLedger *ledger, const char *what, GError **error)
{
  if (!require_owner(ledger, error))
    return FALSE;
  if (ledger->locked)
    return TRUE;
  g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LEDGER,
              "%s of ledger %s without holding its lock; take "
              "qp_ledger_lock() first",
              what, ledger->dir);
  return FALSE;
}

char *
qp_ledger_new_id(void)
{
  /* A version 4 UUID from getrandom(2): glib's g_uuid_string_random() first
   * seeds its global generator from /dev/urandom (an open and a read, and
   * 20,000 instructions of seeding) in every launch. */
  guint8 b[16];
  gsize got = 0;
  while (got < sizeof b) {
    ssize_t n = getrandom(b + got, sizeof b - got, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return g_uuid_string_random();
    got += (gsize)n;
  }
  b[6] = (guint8)((b[6] & 0x0f) | 0x40);
  b[8] = (guint8)((b[8] & 0x3f) | 0x80);
  return g_strdup_printf("%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
                         "%02x%02x%02x%02x%02x%02x",
                         b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8],
                         b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

/* ---- Records: files ---------------------------------------------------- */

/* Records are readable by every user of a shared ledger, whatever the
 * umask of the one that writes them. */
static mode_t
record_mode(const QpLedger *ledger)
{
  return ledger->shared ? 0644 : 0600;
}

/* The owner of the file NAME, or -1 when there is none. */
static gint64
owner_of(const QpLedger *ledger, const char *name)
{
  struct stat st;
  if (fstatat(ledger->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return -1;
  return (gint64)st.st_uid;
}

/* A user writes and removes only its own records, root included: another
 * user's record is never opened for writing. */
static gboolean
require_own(QpLedger *ledger, const char *name, GError **error)
{
  gint64 uid = owner_of(ledger, name);
  if (uid < 0 || uid == (gint64)geteuid())
    return TRUE;
  g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LEDGER,
              "ledger record %s/%s belongs to uid %" G_GINT64_FORMAT
              "; uid %u writes and removes only its own records",
              ledger->dir, name, uid, (unsigned)geteuid());
  return FALSE;
}

void
qp_ledger_set_prune_all(QpLedger *ledger, gboolean prune_all)
{
  ledger->prune_all = prune_all;
}

gboolean
qp_ledger_write(QpLedger *ledger, const QpClaim *claim, GError **error)
{
  if (!require_lock(ledger, "writing a record", error))
    return FALSE;
  if (!qp_claim_id_is_valid(claim->id)) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID,
                "ledger record id \"%s\" is not usable as a file name; "
                "expected letters, digits, '-', '_' or '.' (not leading)",
                claim->id ? claim->id : "");
    return FALSE;
  }
  g_autofree char *text = qp_claim_to_json(claim);
  g_autofree char *name = qp_state_record_name(claim->id);
  if (!require_own(ledger, name, error))
    return FALSE;

  guint64 ino = 0;
  int errsv = 0;
  const char *step = NULL;
  g_autofree char *tmp = NULL;
  if (!qp_state_file_replace(ledger->dirfd, name, text, strlen(text),
                             record_mode(ledger), TRUE, &ino, &errsv, &step,
                             &tmp)) {
    if (strcmp(step, "rename") == 0)
      return qp_state_errno_error(error, errsv, "cannot rename %s/%s to %s",
                                  ledger->dir, tmp, name);
    return qp_state_errno_error(error, errsv, "cannot %s %s/%s", step,
                                ledger->dir, tmp);
  }
  if (ledger->summary != NULL)
    qp_summary_set(ledger->summary, claim->id, ino, (gint64)geteuid(), claim);
  return fsync_dir(ledger, error);
}

gboolean
qp_ledger_remove(QpLedger *ledger, const char *id, GError **error)
{
  if (!qp_claim_id_is_valid(id)) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID,
                "ledger record id \"%s\" is not a valid id", id ? id : "");
    return FALSE;
  }
  if (!require_owner(ledger, error))
    return FALSE;
  gboolean took = FALSE;
  if (!ledger->locked) {
    if (!qp_ledger_lock(ledger, error))
      return FALSE;
    took = TRUE;
  }
  g_autofree char *name = qp_state_record_name(id);
  gboolean ok = require_own(ledger, name, error);
  if (ok) {
    if (ledger->summary == NULL)
      ledger->summary = qp_summary_load(ledger->dirfd, ledger->shared);
    qp_summary_drop(ledger->summary, id);
  }
  if (ok && unlinkat(ledger->dirfd, name, 0) < 0) {
    if (errno != ENOENT)
      ok = qp_state_errno_error(error, errno, "cannot remove %s/%s",
                                ledger->dir, name);
  } else if (ok) {
    ok = fsync_dir(ledger, error);
  }
  if (took)
    qp_ledger_unlock(ledger);
  return ok;
}

/* ---- Reading the ledger -------------------------------------------------- */

static int
cmp_str(gconstpointer a, gconstpointer b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef struct {
  char *name;
  guint64 ino;
} DirEntry;

static void
dir_entry_clear(gpointer p)
{
  g_free(((DirEntry *)p)->name);
}

static int
cmp_entry(gconstpointer a, gconstpointer b)
{
  return strcmp(((const DirEntry *)a)->name, ((const DirEntry *)b)->name);
}

/* The directory's entries with their inodes, by name. */
static GArray *
list_dir(QpLedger *ledger, GError **error)
{
  int fd = openat(ledger->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    qp_state_errno_error(error, errno, "cannot list %s", ledger->dir);
    return NULL;
  }
  DIR *d = fdopendir(fd);
  if (d == NULL) {
    qp_state_errno_error(error, errno, "cannot list %s", ledger->dir);
    close(fd);
    return NULL;
  }
  GArray *entries = g_array_new(FALSE, FALSE, sizeof(DirEntry));
  g_array_set_clear_func(entries, dir_entry_clear);
  struct dirent *de;
  errno = 0;
  while ((de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
      DirEntry e = {g_strdup(de->d_name), (guint64)de->d_ino};
      g_array_append_val(entries, e);
    }
    errno = 0;
  }
  int errsv = errno;
  closedir(d);
  if (errsv != 0) {
    qp_state_errno_error(error, errsv, "cannot list %s", ledger->dir);
    g_array_unref(entries);
    return NULL;
  }
  g_array_sort(entries, cmp_entry);
  return entries;
}

static void
block_corrupt(QpLedger *ledger, const char *name, const QpHost *host,
              QpClaims *claims)
{
  g_autofree char *text = NULL;
  gsize len = 0;
  int errsv = 0;
  if (qp_dir_file_read(ledger->dirfd, name, RECORD_MAX_BYTES, &text, &len, NULL,
                       &errsv) &&
      memchr(text, '\0', len) != NULL)
    g_clear_pointer(&text, g_free);
  g_autofree char *path = g_build_filename(ledger->dir, name, NULL);
  qp_ledger_block_unreadable(claims, path, text, host);
}

/* Reads the record NAME, whose file name says ID: the claim in OUT (its
 * file's owner in *OWNER), or none and the REASON it is unreadable, or
 * neither when it is gone. FALSE (with ERROR) when it cannot be read at
 * all. */
static gboolean
load_record(QpLedger *ledger, const char *name, const char *id, QpClaim **out,
            gint64 *owner, GError **reason, GError **error)
{
  g_autofree char *text = NULL;
  gsize len = 0;
  int errsv = 0;
  struct stat st;
  if (!qp_dir_file_read(ledger->dirfd, name, RECORD_MAX_BYTES, &text, &len, &st,
                        &errsv)) {
    if (errsv == ENOENT)
      return TRUE;
    if (errsv == EACCES && ledger->shared) {
      g_set_error(reason, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID,
                  "not readable by uid %u", (unsigned)geteuid());
      return TRUE;
    }
    if (errsv != EINVAL && errsv != ELOOP)
      return qp_state_errno_error(
          error, errsv, "cannot read ledger record %s/%s", ledger->dir, name);
    g_set_error(reason, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID,
                "not a regular file");
  } else if (len > RECORD_MAX_BYTES) {
    g_set_error(reason, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID,
                "larger than %d bytes", RECORD_MAX_BYTES);
  } else if (memchr(text, '\0', len) != NULL) {
    g_set_error(reason, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID,
                "contains NUL bytes");
  } else {
    g_autoptr(QpClaim) c = qp_claim_from_json(text, len, reason);
    if (c != NULL && strcmp(c->id, id) != 0)
      g_set_error(reason, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID,
                  "its id \"%s\" differs from its file name", c->id);
    else
      *out = g_steal_pointer(&c);
    *owner = (gint64)st.st_uid;
  }
  return TRUE;
}

/* May this reader remove or rename the record NAME? Its owner may, and
 * whoever prunes every record (root's `status --prune`). */
static gboolean
may_change(const QpLedger *ledger, const char *name)
{
  return ledger->prune_all || owner_of(ledger, name) == (gint64)geteuid();
}

/* The unreadable record NAME (id ID, unreadable for REASON): moved aside
 * to ID.json.corrupt by its owner, left where it is for other users; its
 * file name goes to CORRUPT, whose nodes are then held. */
static gboolean
set_aside(QpLedger *ledger, const char *name, const char *id,
          const GError *reason, QpClaims *claims, GPtrArray *corrupt,
          gboolean *changed, GError **error)
{
  if (!may_change(ledger, name)) {
    g_ptr_array_add(claims->warnings,
                    g_strdup_printf("ledger record %s/%s could not be read "
                                    "(%s); it belongs to uid %" G_GINT64_FORMAT
                                    ": only that user or root may remove it",
                                    ledger->dir, name, reason->message,
                                    owner_of(ledger, name)));
    g_ptr_array_add(corrupt, g_strdup(name));
    return TRUE;
  }
  g_autofree char *dest = qp_state_corrupt_name(id);
  if (renameat(ledger->dirfd, name, ledger->dirfd, dest) < 0)
    return qp_state_errno_error(
        error, errno, "cannot move unreadable ledger record %s/%s aside",
        ledger->dir, name);
  *changed = TRUE;
  g_ptr_array_add(claims->warnings,
                  g_strdup_printf("ledger record %s/%s could not be read "
                                  "(%s); moved to %s",
                                  ledger->dir, name, reason->message, dest));
  g_ptr_array_add(corrupt, g_steal_pointer(&dest));
  return TRUE;
}

/* The record file NAME of record ID: its claim in *OUT, or NULL when it is
 * gone or unreadable (then set aside, see set_aside()). FALSE (with ERROR)
 * when it could not be read at all or not moved aside. */
static gboolean
load_or_quarantine(QpLedger *ledger, const char *name, const char *id,
                   QpClaim **out, gint64 *owner, QpClaims *claims,
                   GPtrArray *corrupt, gboolean *changed, GError **error)
{
  g_autoptr(GError) reason = NULL;
  if (!load_record(ledger, name, id, out, owner, &reason, error))
    return FALSE;
  if (reason == NULL)
    return TRUE; /* read, or gone meanwhile */
  return set_aside(ledger, name, id, reason, claims, corrupt, changed, error);
}

/* What a read of the records collects. */
typedef struct {
  QpClaims *claims;
  GPtrArray *corrupt;  /* names of records moved aside */
  GHashTable *present; /* ids of the live records */
  gboolean changed;    /* the directory changed */
} ReadState;

/* The live record NAME (its id *ID), whose file OWNER owns, does not
 * count (WHY): it goes to the ignored records, and root's prune removes
 * it; it stays in the summary, verdict and all, while it is there. */
static gboolean
ignore_record(QpLedger *ledger, const char *name, char **id, gint64 owner,
              const char *why, ReadState *r, GError **error)
{
  if (ledger->prune_all) {
    if (unlinkat(ledger->dirfd, name, 0) < 0 && errno != ENOENT)
      return qp_state_errno_error(error, errno,
                                  "cannot prune ignored ledger record %s/%s",
                                  ledger->dir, name);
    r->changed = TRUE;
    return TRUE;
  }
  QpIgnoredRecord *ig = g_new0(QpIgnoredRecord, 1);
  ig->file = g_build_filename(ledger->dir, name, NULL);
  ig->owner = owner < 0 ? (guint)-1 : (guint)owner;
  ig->reason = g_strdup(why);
  g_ptr_array_add(r->claims->ignored, ig);
  g_hash_table_add(r->present, g_steal_pointer(id));
  return TRUE;
}

/* The record file E (its id the first PLEN characters of its name): its
 * claim from the summary when the summary has it from the same inode, else
 * from the file. A live claim goes to the claims; a stale one counts for
 * nothing and is pruned when this reader may; an unreadable one is set
 * aside. */
static gboolean
read_record(QpLedger *ledger, const DirEntry *e, gsize plen, ReadState *r,
            GError **error)
{
  QpSummary *summary = ledger->summary;
  g_autofree char *id = g_strndup(e->name, plen);
  gint64 owner = qp_summary_owner(summary, id, e->ino);
  g_autoptr(QpClaim) c = qp_summary_claim(summary, id, e->ino);
  if (c == NULL) {
    if (!load_or_quarantine(ledger, e->name, id, &c, &owner, r->claims,
                            r->corrupt, &r->changed, error))
      return FALSE;
    if (c == NULL)
      return TRUE; /* gone or set aside: dropped from the summary */
    qp_summary_set(summary, id, e->ino, owner, c);
  }
  int live = qp_summary_liveness(summary, id, e->ino);
  if (live < 0 || (live && c->resident->len > 0 && c->qemu_rss_mib == 0))
    live = claim_is_live(c); /* not known, or not the RSS with it */
  if (!live) {
    if (!may_change(ledger, e->name)) {
      r->claims->n_stale++;
      return TRUE;
    }
    if (unlinkat(ledger->dirfd, e->name, 0) < 0 && errno != ENOENT) {
      r->claims->n_stale++;
      if (errno == EPERM || errno == EACCES)
        return TRUE; /* another user's, in a sticky directory */
      return qp_state_errno_error(error, errno,
                                  "cannot prune stale ledger record %s/%s",
                                  ledger->dir, e->name);
    }
    r->changed = TRUE;
    return TRUE;
  }
  const char *verdict = qp_summary_verdict(summary, id, e->ino);
  g_autofree char *judged = NULL;
  if (verdict == NULL) {
    verdict = judged = judge_record(c, owner, ledger);
    if (judged != NULL)
      qp_summary_set_verdict(summary, id, e->ino, judged);
  }
  if (verdict != NULL && *verdict != '\0')
    return ignore_record(ledger, e->name, &id, owner, verdict, r, error);
  g_hash_table_add(r->present, g_steal_pointer(&id));
  g_ptr_array_add(r->claims->claims, g_steal_pointer(&c));
  return TRUE;
}

void
qp_ledger_prescan(QpLedger *ledger, const QpHost *host)
{
  g_clear_pointer(&ledger->prescan, qp_summary_free);
  ledger->prescan_gen = summary_generation(ledger);
  ledger->prescan = qp_summary_load(ledger->dirfd, ledger->shared);
  ledger->host = host;
  qp_summary_check_all(ledger->prescan, claim_is_live, judge_record, ledger);
  ledger->host = NULL;
}

/* The summary under the lock: the one the pre-scan read while no critical
 * section has rewritten it since, else read again, with what the pre-scan
 * found out about the records it still has unchanged. */
static void
load_summary(QpLedger *ledger)
{
  g_clear_pointer(&ledger->summary, qp_summary_free);
  if (ledger->prescan != NULL &&
      summary_generation(ledger) == ledger->prescan_gen) {
    ledger->summary = g_steal_pointer(&ledger->prescan);
    return;
  }
  ledger->summary = qp_summary_load(ledger->dirfd, ledger->shared);
  if (ledger->prescan != NULL) {
    qp_summary_take_liveness(ledger->summary, ledger->prescan);
    g_clear_pointer(&ledger->prescan, qp_summary_free);
  }
}

/* One name of the directory listing. */
static gboolean
read_entry(QpLedger *ledger, const DirEntry *e, ReadState *r, GError **error)
{
  const char *name = e->name;
  gsize plen = 0;
  switch (qp_state_file_kind(name, &plen)) {
  case QP_STATE_FILE_TEMP:
    if (qp_state_sweep_temp(ledger->dirfd, name))
      r->changed = TRUE;
    break;
  case QP_STATE_FILE_CORRUPT:
    g_ptr_array_add(r->corrupt, g_strdup(name));
    break;
  case QP_STATE_FILE_RECORD:
    return read_record(ledger, e, plen, r, error);
  case QP_STATE_FILE_OTHER:
    break;
  }
  return TRUE;
}

QpClaims *
qp_ledger_read(QpLedger *ledger, const QpHost *host, GError **error)
{
  if (!require_lock(ledger, "reading", error))
    return NULL;
  g_autoptr(GArray) entries = list_dir(ledger, error);
  if (entries == NULL)
    return NULL;
  load_summary(ledger);
  g_autoptr(QpClaims) claims = qp_claims_new();
  g_autoptr(GPtrArray) corrupt = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GHashTable) present =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  ReadState r = {claims, corrupt, present, FALSE};
  ledger->host = host;
  for (guint i = 0; i < entries->len; i++)
    if (!read_entry(ledger, &g_array_index(entries, DirEntry, i), &r, error)) {
      ledger->host = NULL;
      return NULL;
    }
  ledger->host = NULL;
  qp_summary_retain(ledger->summary, present);

  g_ptr_array_sort(corrupt, cmp_str);
  claims->n_unreadable = corrupt->len;
  for (guint i = 0; i < corrupt->len; i++)
    block_corrupt(ledger, corrupt->pdata[i], host, claims);

  if (r.changed && !fsync_dir(ledger, error))
    return NULL;
  return g_steal_pointer(&claims);
}
