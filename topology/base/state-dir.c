/* The state directory (see state-dir.h): which one a user gets, its
 * checks, the names of the files in it and their temporary files. */
#include "topology/base/state-dir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "topology/base/accounts.h"
#include "topology/base/dir-file.h"
#include "topology/base/proc.h"

#define RECORD_SUFFIX ".json"
#define CORRUPT_SUFFIX ".json.corrupt"
#define TEMP_MARK ".tmp-"

gboolean
qp_state_errno_error(GError **error, int errsv, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *what = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LEDGER, "%s: %s",
              what, g_strerror(errsv));
  return FALSE;
}

/* ---- Which directory, and whether it may be used ------------------------ */

gboolean
qp_state_dir_stat_ok(const char *dir, const struct stat *st, GError **error)
{
  uid_t me = geteuid();
  const char *want = "0700, or 3770 with a group for a shared ledger";
  if (S_ISLNK(st->st_mode)) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LEDGER,
                "state directory %s is a symlink; expected a real directory "
                "owned by uid %u with mode %s",
                dir, (unsigned)me, want);
    return FALSE;
  }
  if (!S_ISDIR(st->st_mode)) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LEDGER,
                "state directory %s is not a directory; expected a directory "
                "owned by uid %u with mode %s",
                dir, (unsigned)me, want);
    return FALSE;
  }
  if (st->st_uid != me && (st->st_uid != 0 || !(st->st_mode & S_IWGRP))) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LEDGER,
                "state directory %s is owned by uid %u; expected uid %u, or "
                "root with mode 3770 for a shared ledger (remove it or choose "
                "another --state-dir)",
                dir, (unsigned)st->st_uid, (unsigned)me);
    return FALSE;
  }
  if ((st->st_mode & S_IWOTH) ||
      ((st->st_mode & S_IWGRP) && !(st->st_mode & S_ISVTX))) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LEDGER,
                "state directory %s has mode %04o, writable by %s; expected "
                "%s",
                dir, (unsigned)(st->st_mode & 07777),
                (st->st_mode & S_IWOTH) ? "others"
                                        : "its group without the sticky bit",
                want);
    return FALSE;
  }
  return TRUE;
}

gboolean
qp_state_dir_is_shared(const struct stat *st)
{
  return st->st_uid != geteuid() || (st->st_mode & S_IWGRP);
}

/* Creates the shared ledger directory DIR as root: mode 3770 for GROUP,
 * as the tmpfiles.d entry makes it at boot. Silent when GROUP does not
 * exist (qp_state_dir_open() then makes a private one) or DIR does. */
static void
create_shared_dir(const char *dir, const char *group)
{
  struct stat st;
  gid_t gid;
  /* Made already (the tmpfiles.d entry at boot, or an earlier launch):
   * then the group is not even looked up. */
  if (lstat(dir, &st) == 0 || group[0] == '\0' || !qp_group_gid(group, &gid) ||
      mkdir(dir, 0700) < 0)
    return;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return;
  if (fchown(fd, 0, gid) == 0)
    (void)fchmod(fd, 03770);
  close(fd);
}

static char *
per_user_dir(void)
{
  const char *xdg = g_getenv("XDG_RUNTIME_DIR");
  if (xdg != NULL && *xdg != '\0')
    return g_build_filename(xdg, "qemu-pin", NULL);
  return g_strdup_printf("/tmp/qemu-pin-%u", (unsigned)geteuid());
}

/* Why this user cannot use the shared directory SHARED, and the fix; NULL
 * when it can. */
static char *
shared_dir_problem(const char *shared, const char *group)
{
  struct stat st;
  if (lstat(shared, &st) < 0)
    return g_strdup_printf(
        "%s (create it with `systemd-tmpfiles --create qemu-pin.conf`)",
        errno == ENOENT ? "it does not exist" : g_strerror(errno));
  g_autoptr(GError) bad = NULL;
  if (!qp_state_dir_stat_ok(shared, &st, &bad) || st.st_uid == geteuid() ||
      !(st.st_mode & S_IWGRP))
    return g_strdup_printf("it is not shared (mode %04o, owner uid %u; make "
                           "it 3770 root:%s as qemu-pin's tmpfiles.d entry "
                           "does)",
                           (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid,
                           group[0] != '\0' ? group : "GROUP");
  if (faccessat(AT_FDCWD, shared, W_OK | X_OK, AT_EACCESS) == 0)
    return NULL;
  g_autofree char *user = qp_user_label(geteuid());
  g_autofree char *gname = qp_group_label(st.st_gid);
  return g_strdup_printf("%s is not in its group %s (add it: `usermod -aG %s "
                         "%s`, then start QEMU anew)",
                         user, gname, gname, user);
}

char *
qp_state_dir_choose(const char *shared, const char *group, char **warning)
{
  if (warning != NULL)
    *warning = NULL;
  if (geteuid() == 0) {
    create_shared_dir(shared, group);
    return g_strdup(shared);
  }
  g_autofree char *problem = shared_dir_problem(shared, group);
  if (problem == NULL)
    return g_strdup(shared);
  char *dir = per_user_dir();
  if (warning != NULL)
    *warning = g_strdup_printf("shared ledger %s is not usable: %s; using "
                               "%s, which other users' VMs do not see",
                               shared, problem, dir);
  return dir;
}

char *
qp_state_dir_default(char **warning)
{
  return qp_state_dir_choose(QP_SHARED_LEDGER_DIR, QP_LEDGER_GROUP, warning);
}

char *
qp_state_dir_for(const char *configured, char **warning)
{
  if (warning != NULL)
    *warning = NULL;
  if (configured != NULL)
    return g_strdup(configured);
  return qp_state_dir_default(warning);
}

int
qp_state_dir_open(const char *dir, gboolean create, struct stat *out,
                  GError **error)
{
  g_return_val_if_fail(dir != NULL, -1);
  gboolean created = FALSE;
  if (create && mkdir(dir, 0700) == 0)
    created = TRUE;
  else if (create && errno != EEXIST) {
    qp_state_errno_error(error, errno, "cannot create state directory %s%s",
                         dir,
                         errno == ENOENT ? " (its parent must exist)" : "");
    return -1;
  }

  struct stat st;
  if (lstat(dir, &st) < 0) {
    qp_state_errno_error(error, errno, "cannot inspect state directory %s",
                         dir);
    return -1;
  }
  if (!qp_state_dir_stat_ok(dir, &st, error))
    return -1;

  int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dirfd < 0) {
    if (errno == ELOOP || errno == ENOTDIR) {
      /* Swapped between lstat and open: report it as what it is now. */
      if (lstat(dir, &st) == 0 && !qp_state_dir_stat_ok(dir, &st, error))
        return -1;
    }
    qp_state_errno_error(error, errno, "cannot open state directory %s", dir);
    return -1;
  }
  /* The fd is what we use from now on: check that, not the path. */
  if (fstat(dirfd, &st) < 0) {
    qp_state_errno_error(error, errno, "cannot inspect state directory %s",
                         dir);
    close(dirfd);
    return -1;
  }
  if (!qp_state_dir_stat_ok(dir, &st, error)) {
    close(dirfd);
    return -1;
  }
  if (created && (st.st_mode & 07777) != 0700)
    (void)fchmod(dirfd, 0700);
  if (out != NULL)
    *out = st;
  return dirfd;
}

/* ---- The files in it ----------------------------------------------------- */

char *
qp_state_record_name(const char *id)
{
  return g_strconcat(id, RECORD_SUFFIX, NULL);
}

char *
qp_state_corrupt_name(const char *id)
{
  return g_strconcat(id, CORRUPT_SUFFIX, NULL);
}

char *
qp_state_snapshot_name(gboolean shared)
{
  return shared ? g_strdup_printf(QP_STATE_HOST_SNAPSHOT "-%u",
                                  (unsigned)geteuid())
                : g_strdup(QP_STATE_HOST_SNAPSHOT);
}

char *
qp_state_temp_name(const char *name)
{
  return g_strdup_printf(".%s" TEMP_MARK "%d", name[0] == '.' ? name + 1 : name,
                         (int)getpid());
}

/* ".<name>.tmp-<pid>": the pid of the writer, or 0 if NAME is not a
 * temporary file. */
static int
temp_file_pid(const char *name)
{
  if (name[0] != '.')
    return 0;
  const char *mark = g_strrstr(name, TEMP_MARK);
  if (mark == NULL || mark == name)
    return 0;
  const char *p = mark + strlen(TEMP_MARK);
  char *end = NULL;
  guint64 pid = g_ascii_strtoull(p, &end, 10);
  if (end == p || *end != '\0' || pid == 0 || pid > INT_MAX)
    return 0;
  return (int)pid;
}

static gboolean
has_suffix_len(const char *name, const char *suffix, gsize *prefix_len)
{
  gsize n = strlen(name), s = strlen(suffix);
  if (n <= s || strcmp(name + n - s, suffix) != 0)
    return FALSE;
  *prefix_len = n - s;
  return TRUE;
}

QpStateFile
qp_state_file_kind(const char *name, gsize *id_len)
{
  if (temp_file_pid(name) != 0)
    return QP_STATE_FILE_TEMP;
  if (name[0] == '.')
    return QP_STATE_FILE_OTHER;
  if (has_suffix_len(name, CORRUPT_SUFFIX, id_len))
    return QP_STATE_FILE_CORRUPT;
  if (has_suffix_len(name, RECORD_SUFFIX, id_len))
    return QP_STATE_FILE_RECORD;
  return QP_STATE_FILE_OTHER;
}

gboolean
qp_state_sweep_temp(int dirfd, const char *name)
{
  int pid = temp_file_pid(name);
  return pid != 0 && !qp_proc_exists(pid) && unlinkat(dirfd, name, 0) == 0;
}

gboolean
qp_state_file_replace(int dirfd, const char *name, const char *text, gsize len,
                      mode_t mode, gboolean sync, guint64 *ino, int *errsv,
                      const char **step, char **tmp_out)
{
  g_autofree char *tmp = qp_state_temp_name(name);
  gboolean ok = qp_dir_file_replace(dirfd, name, tmp, text, len, mode, sync,
                                    ino, errsv, step);
  if (tmp_out != NULL)
    *tmp_out = g_steal_pointer(&tmp);
  return ok;
}
