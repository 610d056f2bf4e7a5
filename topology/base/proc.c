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

/* Reads /proc/PID/stat into TEXT (SIZE bytes) and returns where its
 * fields resume after comm (field 2, which may hold spaces and
 * parentheses: it ends at the last ')'), at field 3; NULL when PID is
 * gone or the text is not a stat line. One open and one read: this runs
 * for every record of the ledger. */
static const char *
read_stat(int pid, char *text, gsize size)
{
  if (pid <= 0)
    return NULL;
  char path[32];
  g_snprintf(path, sizeof path, "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return NULL;
  ssize_t n;
  do
    n = read(fd, text, size - 1);
  while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0)
    return NULL;
  text[n] = '\0';
  const char *p = strrchr(text, ')');
  if (p == NULL)
    return NULL;
  p++;
  while (*p == ' ')
    p++;
  return p;
}

guint64
qp_proc_start_and_rss(int pid, guint64 *rss_kib)
{
  if (rss_kib != NULL)
    *rss_kib = 0;
  char text[1024];
  const char *p = read_stat(pid, text, sizeof text);
  /* Field 3 is the state: a zombie has released its memory and CPUs. */
  if (p == NULL || *p == 'Z' || *p == 'X' || *p == 'x')
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

int
qp_proc_parent(int pid)
{
  char text[1024];
  const char *p = read_stat(pid, text, sizeof text);
  /* Field 4, after the state. */
  p = p != NULL ? next_field(p) : NULL;
  if (p == NULL || !g_ascii_isdigit(*p))
    return -1;
  return (int)g_ascii_strtoll(p, NULL, 10);
}

gboolean
qp_proc_exists(int pid)
{
  return kill(pid, 0) == 0 || errno == EPERM;
}

char *
qp_proc_status_field(const char *status, const char *field)
{
  const char *p = status;
  gsize fl = strlen(field);
  while (p != NULL && *p != '\0') {
    if (strncmp(p, field, fl) == 0 && p[fl] == ':') {
      p += fl + 1;
      while (*p == '\t' || *p == ' ')
        p++;
      return g_strndup(p, strcspn(p, "\n"));
    }
    p = strchr(p, '\n');
    if (p != NULL)
      p++;
  }
  return NULL;
}
