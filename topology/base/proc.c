/* Process identity (see proc.h). */
#include "topology/base/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

guint64
qp_proc_start_time(int pid)
{
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
  for (int field = 3; field < 22; field++) {
    p = strchr(p, ' ');
    if (p == NULL)
      return 0;
    while (*p == ' ')
      p++;
  }
  char *end = NULL;
  errno = 0;
  guint64 v = g_ascii_strtoull(p, &end, 10);
  if (errno != 0 || end == p)
    return 0;
  return v;
}

gboolean
qp_proc_exists(int pid)
{
  return kill(pid, 0) == 0 || errno == EPERM;
}
