/* Process identity (see proc.h). */
#include "topology/base/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

guint64
qp_proc_start_time(int pid)
{
  return qp_proc_start_and_rss(pid, NULL);
}

/* Skips to the next space-separated field of P, or NULL. */
static const char *
next_field(const char *p)
{
  p = strchr(p, ' ');
  if (p == NULL)
    return NULL;
  while (*p == ' ')
    p++;
  return p;
}

guint64
qp_proc_start_and_rss(int pid, guint64 *rss_kib)
{
  if (rss_kib != NULL)
    *rss_kib = 0;
  if (pid <= 0)
    return 0;
  /* One open and one read: this runs for every record of the ledger. */
  char path[32], text[1024];
  g_snprintf(path, sizeof path, "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return 0;
  ssize_t n;
  do
    n = read(fd, text, sizeof text - 1);
  while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0)
    return 0;
  text[n] = '\0';
  /* comm (field 2) may hold spaces and parentheses: fields resume after the
   * last ')'. */
  const char *p = strrchr(text, ')');
  if (p == NULL)
    return 0;
  p++;
  /* Field 3 is the state: a zombie has released its memory and CPUs. */
  while (*p == ' ')
    p++;
  if (*p == 'Z' || *p == 'X' || *p == 'x')
    return 0;
  for (int field = 3; field < 22 && p != NULL; field++)
    p = next_field(p);
  if (p == NULL)
    return 0;
  char *end = NULL;
  errno = 0;
  guint64 v = g_ascii_strtoull(p, &end, 10);
  if (errno != 0 || end == p)
    return 0;
  /* Field 23 is vsize, 24 rss in pages. */
  for (int field = 22; field < 24 && p != NULL; field++)
    p = next_field(p);
  if (rss_kib != NULL && p != NULL) {
    long page_kib = MAX(sysconf(_SC_PAGESIZE) / 1024, 1);
    *rss_kib = g_ascii_strtoull(p, NULL, 10) * (guint64)page_kib;
  }
  return v;
}

gboolean
qp_proc_exists(int pid)
{
  return kill(pid, 0) == 0 || errno == EPERM;
}
