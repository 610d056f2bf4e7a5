/* The real QEMU binary of a drop-in, with the C library only (front.h). */
#include "launcher/front/front.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int
qp_is_qemu_name(const char *name)
{
  return strncmp(name, "qemu-system-", 12) == 0 || strcmp(name, "kvm") == 0 ||
         strcmp(name, "qemu-kvm") == 0;
}

/* An executable regular file (after symlinks) that is not qemu-pin itself. */
static int
is_other_program(const char *path, const struct stat *self)
{
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
         access(path, X_OK) == 0 &&
         !(st.st_dev == self->st_dev && st.st_ino == self->st_ino);
}

/* PATH is qemu-pin under a QEMU name: the binary dpkg-divert moved aside
 * to PATH.distrib (its default name, what qemu-pin-takeover uses) is the
 * real QEMU. A string of malloc(), or NULL. */
static char *
diverted_qemu(const char *path, const struct stat *self)
{
  struct stat st;
  if (stat(path, &st) < 0 || st.st_dev != self->st_dev ||
      st.st_ino != self->st_ino)
    return NULL;
  char *distrib = NULL;
  if (asprintf(&distrib, "%s.distrib", path) < 0)
    return NULL;
  if (is_other_program(distrib, self))
    return distrib;
  free(distrib);
  return NULL;
}

char *
qp_front_basename(const char *path)
{
  size_t end = strlen(path);
  while (end > 1 && path[end - 1] == '/')
    end--;
  if (end == 0)
    return strdup(".");
  size_t start = end;
  while (start > 0 && path[start - 1] != '/')
    start--;
  if (start == end) /* only slashes */
    return strdup("/");
  return strndup(path + start, end - start);
}

/* DIR/BASE, DIR's trailing slashes dropped ("." for an empty DIR). */
static char *
in_dir(const char *dir, size_t len, const char *base)
{
  if (len == 0) {
    dir = ".";
    len = 1;
  }
  while (len > 1 && dir[len - 1] == '/')
    len--;
  char *p = NULL;
  if (asprintf(&p, "%.*s%s%s", (int)len, dir, dir[len - 1] == '/' ? "" : "/",
               base) < 0)
    return NULL;
  return p;
}

static const char *self_path = "/proc/self/exe";

const char *
qp_front_self(void)
{
  return self_path;
}

void
qp_front_set_self(const char *path)
{
  self_path = path;
}

char *
qp_front_find_qemu(const char *argv0, const char *path_env, int *no_self)
{
  struct stat self;
  *no_self = stat(self_path, &self) < 0;
  if (*no_self)
    return NULL;
  char *found = NULL;
  if (strchr(argv0, '/') != NULL && (found = diverted_qemu(argv0, &self)))
    return found;
  char *base = qp_front_basename(argv0);
  const char *dirs = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
  /* An empty PATH has no directory at all; an empty entry is ".". */
  for (const char *d = dirs; *dirs && base != NULL && found == NULL;) {
    size_t len = strcspn(d, ":");
    char *cand = in_dir(d, len, base);
    if (cand != NULL && is_other_program(cand, &self))
      found = cand;
    else if (cand != NULL)
      found = diverted_qemu(cand, &self);
    if (found != cand)
      free(cand);
    if (d[len] == '\0')
      break;
    d += len + 1;
  }
  free(base);
  return found;
}
