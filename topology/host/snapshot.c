/* The host snapshot (see snapshot.h): where it lives, its key, and the
 * load through it. Its file is topology/host/snapshot-text.h's. */
#include "topology/host/snapshot.h"

#include "topology/base/dir-file.h"
#include "topology/base/proc.h"
#include "topology/base/state-dir.h"
#include "topology/host/node-memory.h"
#include "topology/host/snapshot-text.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SNAPSHOT_MAX_BYTES (64 * 1024 * 1024)

/* The first line of PATH, or "-" when it cannot be read. */
static char *
first_line(const char *path)
{
  char buf[4096];
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return g_strdup("-");
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return g_strdup("-");
  buf[n] = '\0';
  buf[strcspn(buf, "\n")] = '\0';
  return g_strdup(buf);
}

/* The value of FIELD in /proc/self/status (STATUS), "-" when it has none. */
static char *
status_field(const char *status, const char *field)
{
  char *value = qp_proc_status_field(status, field);
  return value != NULL ? value : g_strdup("-");
}

char *
qp_host_snapshot_key(void)
{
  g_autofree char *boot = first_line("/proc/sys/kernel/random/boot_id");
  if (strcmp(boot, "-") == 0)
    return NULL; /* no boot id, no way to tell a snapshot of another boot */
  g_autofree char *cpus = first_line("/sys/devices/system/cpu/online");
  g_autofree char *nodes = first_line("/sys/devices/system/node/online");
  g_autofree char *status =
      qp_file_read_text("/proc/self/status", SNAPSHOT_MAX_BYTES);
  if (status == NULL)
    status = g_strdup("");
  g_autofree char *allowed = status_field(status, "Cpus_allowed_list");
  g_autofree char *mems = status_field(status, "Mems_allowed_list");
  return g_strdup_printf("boot %s\ncpus %s\nnodes %s\nallowed %s\n"
                         "mems %s\nversion %s hwloc %x\n",
                         boot, cpus, nodes, allowed, mems, QP_VERSION,
                         (unsigned)hwloc_get_api_version());
}

/* DIR opened, when it is a directory of this user that others cannot
 * write, or a shared ledger (root's or this user's, group-writable with the
 * sticky bit: nobody else can replace this user's files in it); else -1.
 * *NAME is the snapshot's file name there: in a shared ledger each user has
 * its own, the only one it reads. */
static int
open_state_dir(const char *dir, char **name)
{
  struct stat st;
  int fd = qp_state_dir_open(dir, FALSE, &st, NULL);
  if (fd >= 0)
    *name = qp_state_snapshot_name(qp_state_dir_is_shared(&st));
  return fd;
}

/* The host of the snapshot NAME in DIRFD if it is whole, this user's and
 * made under KEY; else NULL. */
static QpHost *
read_snapshot(int dirfd, const char *name, const char *key)
{
  g_autofree char *text = NULL;
  gsize got = 0;
  struct stat st;
  int errsv = 0;
  if (!qp_dir_file_read(dirfd, name, SNAPSHOT_MAX_BYTES, &text, &got, &st,
                        &errsv) ||
      st.st_uid != geteuid() || got > SNAPSHOT_MAX_BYTES)
    return NULL;
  return qp_host_snapshot_parse(text, got, key);
}

/* HOST (before its live step) as the snapshot NAME in DIRFD, under KEY. */
static void
write_snapshot(int dirfd, const char *name, const char *key, const QpHost *host)
{
  g_autofree char *text = qp_host_snapshot_format(host, key);
  int errsv = 0;
  /* A snapshot that cannot be written costs the next start a live load. */
  if (text != NULL)
    (void)qp_state_file_replace(dirfd, name, text, strlen(text), 0600, FALSE,
                                NULL, &errsv, NULL, NULL);
}

/* The name of the kept watermark figures next to the snapshot NAME:
 * "NAME.watermarks", this user's own as the snapshot is. */
static char *
watermarks_name(const char *name)
{
  return g_strconcat(name, ".watermarks", NULL);
}

/* The kept watermark figures NAME in DIRFD if this user's; else NULL (their
 * key and their whole are qp_watermarks_parse()'s to check). */
static char *
read_watermarks(int dirfd, const char *name)
{
  g_autofree char *text = NULL;
  gsize got = 0;
  struct stat st;
  int errsv = 0;
  if (!qp_dir_file_read(dirfd, name, QP_WATERMARKS_MAX_BYTES, &text, &got, &st,
                        &errsv) ||
      st.st_uid != geteuid() || got > QP_WATERMARKS_MAX_BYTES ||
      strlen(text) != got)
    return NULL;
  return g_steal_pointer(&text);
}

QpHost *
qp_host_load_snapshot(const char *dir, gboolean with_io, GError **error)
{
  if (with_io || dir == NULL)
    return qp_host_load_full(NULL, with_io, error);
  g_autofree char *name = NULL;
  int dirfd = open_state_dir(dir, &name);
  if (dirfd < 0)
    return qp_host_load_full(NULL, FALSE, error);
  g_autofree char *key = qp_host_snapshot_key();
  if (key == NULL) {
    close(dirfd);
    return qp_host_load_full(NULL, FALSE, error);
  }
  g_autoptr(QpHost) host = read_snapshot(dirfd, name, key);
  if (host == NULL) {
    host = qp_host_load_live_static(error);
    if (host != NULL)
      write_snapshot(dirfd, name, key, host);
  }
  if (host == NULL) {
    close(dirfd);
    return NULL;
  }
  g_autofree char *wm_name = watermarks_name(name);
  g_autofree char *kept = read_watermarks(dirfd, wm_name);
  QpWatermarkCache watermarks = {.kept = kept};
  gboolean ok = qp_host_apply_live(host, &watermarks, error);
  g_autofree char *fresh = watermarks.fresh;
  int errsv = 0;
  /* Figures that cannot be kept cost the next start a read of zoneinfo. */
  if (ok && fresh != NULL)
    (void)qp_state_file_replace(dirfd, wm_name, fresh, strlen(fresh), 0600,
                                FALSE, NULL, &errsv, NULL, NULL);
  close(dirfd);
  if (!ok)
    return NULL;
  return g_steal_pointer(&host);
}
