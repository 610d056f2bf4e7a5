/* The way to the full program, with the C library only (front.h). */
#include "launcher/front/front.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FULL_PROGRAM "qemu-pin-full"

/* qemu-pin's own executable, resolved: a string of malloc(), or NULL. */
static char *
self_resolved(void)
{
  char exe[PATH_MAX];
  ssize_t n = readlink(qp_front_self(), exe, sizeof(exe) - 1);
  if (n <= 0)
    return NULL;
  exe[n] = '\0';
  return strdup(exe);
}

char *
qp_front_full_path(void)
{
  char *exe = self_resolved();
  char *slash = exe != NULL ? strrchr(exe, '/') : NULL;
  if (slash == NULL) {
    free(exe);
    return NULL;
  }
  *slash = '\0';
  char *p = NULL;
  if (asprintf(&p, "%s/%s", exe, FULL_PROGRAM) < 0)
    p = NULL;
  if (p != NULL && access(p, X_OK) != 0) {
    free(p);
    p = NULL;
    int absolute = QP_MODULE_DIR[0] == '/';
    if (asprintf(&p, "%s%s" QP_MODULE_DIR "/" FULL_PROGRAM, absolute ? "" : exe,
                 absolute ? "" : "/") < 0)
      p = NULL;
  }
  free(exe);
  return p;
}

void
qp_front_exec_full(int argc, char **argv, char **path)
{
  *path = qp_front_full_path();
  char *self = self_resolved();
  char **args = calloc((size_t)argc + 3, sizeof(char *));
  if (*path == NULL || self == NULL || args == NULL) {
    free(self);
    free(args);
    errno = ENOENT;
    return;
  }
  args[0] = argv[0];
  args[1] = (char *)QP_FULL_MARK;
  args[2] = self;
  for (int i = 1; i < argc; i++)
    args[i + 2] = argv[i];
  execv(*path, args);
  int errsv = errno;
  free(self);
  free(args);
  errno = errsv;
}
