/* Whole files in a directory file descriptor (see dir-file.h). */
#include "topology/base/dir-file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

gboolean
qp_dir_file_read(int dirfd, const char *name, gsize max, char **out,
                 gsize *out_len, struct stat *st, int *errsv)
{
  /* O_NONBLOCK: a FIFO put there must not hold the reader (and the
   * ledger's lock with it) until someone writes to it; on a regular file
   * it changes nothing. */
  int fd = openat(dirfd, name,
                  O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    *errsv = errno;
    return FALSE;
  }
  struct stat local;
  if (st == NULL)
    st = &local;
  int failed = fstat(fd, st) < 0 ? errno : !S_ISREG(st->st_mode) ? EINVAL : 0;
  if (failed != 0) {
    *errsv = failed;
    close(fd);
    return FALSE;
  }
  GString *s = g_string_sized_new(
      st->st_size > 0 ? MIN((gsize)st->st_size, max) + 1 : 256);
  char buf[8192];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      *errsv = errno;
      close(fd);
      g_string_free(s, TRUE);
      return FALSE;
    }
    if (n == 0)
      break;
    g_string_append_len(s, buf, n);
    if (s->len > max)
      break;
  }
  close(fd);
  *out_len = s->len;
  *out = g_string_free(s, FALSE);
  return TRUE;
}

char *
qp_file_read_text(const char *path, gsize max)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return NULL;
  GString *s = g_string_sized_new(MIN(max, 4096) + 1);
  while (s->len < max) {
    gsize room = MIN(max - s->len, 8192);
    g_string_set_size(s, s->len + room);
    ssize_t n = read(fd, s->str + s->len - room, room);
    g_string_set_size(s, s->len - room + (n > 0 ? (gsize)n : 0));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      close(fd);
      g_string_free(s, TRUE);
      return NULL;
    }
    if (n == 0)
      break;
  }
  close(fd);
  return g_string_free(s, FALSE);
}

static gboolean
write_all(int fd, const char *buf, gsize len)
{
  while (len > 0) {
    ssize_t n = write(fd, buf, len);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return FALSE;
    }
    buf += n;
    len -= (gsize)n;
  }
  return TRUE;
}

/* TMP created anew in DIRFD: a leftover of ours (a writer that failed with
 * the same PID) is removed once. */
static int
create_tmp(int dirfd, const char *tmp, mode_t mode)
{
  int fd = -1;
  for (int attempt = 0; attempt < 2 && fd < 0; attempt++) {
    fd = openat(dirfd, tmp,
                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY,
                mode);
    if (fd < 0 && errno == EEXIST && attempt == 0)
      (void)unlinkat(dirfd, tmp, 0);
    else if (fd < 0)
      break;
  }
  return fd;
}

static gboolean
fail(int dirfd, const char *tmp, const char *what, int *errsv,
     const char **step)
{
  *errsv = errno;
  (void)unlinkat(dirfd, tmp, 0);
  if (step != NULL)
    *step = what;
  return FALSE;
}

gboolean
qp_dir_file_replace(int dirfd, const char *name, const char *tmp,
                    const char *text, gsize len, mode_t mode, gboolean sync,
                    guint64 *ino, int *errsv, const char **step)
{
  int fd = create_tmp(dirfd, tmp, mode);
  if (fd < 0) {
    *errsv = errno;
    if (step != NULL)
      *step = "create";
    return FALSE;
  }
  struct stat st;
  if (fchmod(fd, mode) < 0 || !write_all(fd, text, len) ||
      (sync && fsync(fd) < 0) || fstat(fd, &st) < 0) {
    int e = errno;
    close(fd);
    errno = e;
    return fail(dirfd, tmp, "write", errsv, step);
  }
  if (close(fd) < 0)
    return fail(dirfd, tmp, "write", errsv, step);
  if (renameat(dirfd, tmp, dirfd, name) < 0)
    return fail(dirfd, tmp, "rename", errsv, step);
  if (ino != NULL)
    *ino = (guint64)st.st_ino;
  return TRUE;
}

guint64
qp_dir_file_hash(const char *p, gsize n)
{
  guint64 h = 14695981039346656037ull;
  for (gsize i = 0; i < n; i++) {
    h ^= (guchar)p[i];
    h *= 1099511628211ull;
  }
  return h;
}
