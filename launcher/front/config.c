/* The config file as far as the mode of a VM needs it (front.h), with the
 * C library only. The full program reads the file with GKeyFile; this
 * reader takes only the subset that GKeyFile reads in one obvious way, and
 * says "not read" for anything else, so that its answer is GKeyFile's. */
#include "launcher/front/front.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define MAX_CONFIG (64 * 1024)
#define MAX_GROUPS 256

typedef struct {
  const QpVmNames *names;
  const char *groups[MAX_GROUPS]; /* each group's [line], for duplicates */
  size_t group_len[MAX_GROUPS];
  unsigned n_groups;
  int in_defaults, in_vm;              /* the current group */
  const char *vm_mode, *defaults_mode; /* values, in the text */
  const char *vm_qemu, *defaults_qemu;
  size_t vm_mode_len, defaults_mode_len, vm_qemu_len, defaults_qemu_len;
} Reader;

/* The whole file (NUL-terminated, malloc()), or NULL: *MISSING when it
 * does not exist. */
static char *
read_file(const char *path, int *missing)
{
  *missing = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    *missing = errno == ENOENT;
    return NULL;
  }
  struct stat st;
  char *text = NULL;
  int ok = fstat(fd, &st) == 0;
  /* /dev/null reads as an empty file, as GLib reads it. */
  if (ok && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3)) {
    st.st_size = 0;
    st.st_mode = S_IFREG;
  }
  if (ok && S_ISREG(st.st_mode) && st.st_size < MAX_CONFIG &&
      (text = malloc((size_t)st.st_size + 1)) != NULL) {
    ssize_t n = read(fd, text, (size_t)st.st_size + 1);
    /* A NUL byte is not text (and GKeyFile's to refuse). */
    if (n == st.st_size && memchr(text, '\0', (size_t)n) == NULL) {
      text[n] = '\0';
    } else {
      free(text);
      text = NULL;
    }
  }
  close(fd);
  return text;
}

static int
names_match(const char *group, size_t len, const char *prefix, const char *name,
            int nocase)
{
  size_t p = strlen(prefix);
  if (name == NULL || len < p || strncmp(group, prefix, p) != 0 ||
      strlen(name) != len - p)
    return 0;
  for (size_t i = p; i < len; i++) {
    char a = group[i], b = name[i - p];
    if (nocase && a >= 'A' && a <= 'Z')
      a = (char)(a - 'A' + 'a');
    if (nocase && b >= 'A' && b <= 'Z')
      b = (char)(b - 'A' + 'a');
    if (a != b)
      return 0;
  }
  return 1;
}

/* A [group] line of LEN bytes at L. */
static int
read_group(Reader *r, const char *l, size_t len)
{
  const char *g = l + 1;
  size_t n = len - 2;
  if (len < 3 || l[len - 1] != ']' || memchr(g, '[', n) || memchr(g, ']', n))
    return 0;
  for (unsigned i = 0; i < r->n_groups; i++)
    if (r->group_len[i] == n && strncmp(r->groups[i], g, n) == 0)
      return 0; /* GKeyFile merges a group given twice */
  if (r->n_groups == MAX_GROUPS)
    return 0;
  r->groups[r->n_groups] = g;
  r->group_len[r->n_groups++] = n;
  const QpVmNames *vm = r->names;
  r->in_defaults = n == 8 && strncmp(g, "defaults", 8) == 0;
  r->in_vm = vm != NULL && (names_match(g, n, "name:", vm->name, 0) ||
                            names_match(g, n, "uuid:", vm->uuid, 1) ||
                            names_match(g, n, "id:", vm->id, 0));
  return 1;
}

static int
is_key_char(char c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* A key = value line of LEN bytes at L, in a group. */
static int
read_key(Reader *r, const char *l, size_t len)
{
  size_t k = 0;
  while (k < len && is_key_char(l[k]))
    k++;
  size_t eq = k;
  while (eq < len && l[eq] == ' ')
    eq++;
  if (k == 0 || r->n_groups == 0 || eq == len || l[eq] != '=')
    return 0;
  size_t v = eq + 1;
  while (v < len && l[v] == ' ')
    v++;
  /* GKeyFile keeps trailing blanks and undoes escapes: not this reader. */
  if ((len > v && l[len - 1] == ' ') || memchr(l + v, '\\', len - v))
    return 0;
  int is_mode = k == 4 && strncmp(l, "mode", 4) == 0;
  int is_qemu = k == 4 && strncmp(l, "qemu", 4) == 0;
  /* A later key wins, as in GKeyFile; the VM's groups after [defaults]. */
  if (is_mode && r->in_vm) {
    r->vm_mode = l + v;
    r->vm_mode_len = len - v;
  } else if (is_mode && r->in_defaults) {
    r->defaults_mode = l + v;
    r->defaults_mode_len = len - v;
  }
  if (is_qemu && r->in_vm) {
    r->vm_qemu = l + v;
    r->vm_qemu_len = len - v;
  } else if (is_qemu && r->in_defaults) {
    r->defaults_qemu = l + v;
    r->defaults_qemu_len = len - v;
  }
  return 1;
}

static int
read_lines(Reader *r, const char *text)
{
  for (const char *p = text; *p;) {
    size_t len = strcspn(p, "\n");
    for (size_t i = 0; i < len; i++)
      if ((unsigned char)p[i] < 0x20 || (unsigned char)p[i] >= 0x7f)
        return 0; /* tabs, CR, UTF-8: GKeyFile's to read */
    int ok = len == 0 || p[0] == '#' ||
             (p[0] == '[' ? read_group(r, p, len) : read_key(r, p, len));
    if (!ok)
      return 0;
    p += len + (p[len] == '\n');
  }
  return 1;
}

static int
copy_value(char **to, const char *from, size_t len)
{
  if (from == NULL)
    return 1;
  *to = strndup(from, len);
  return *to != NULL;
}

int
qp_front_config_read(const char *path, int is_explicit, const QpVmNames *names,
                     QpFrontConfig *out)
{
  *out = (QpFrontConfig){0};
  int missing;
  char *text = read_file(path, &missing);
  if (text == NULL)
    return missing && !is_explicit;
  Reader r = {.names = names};
  int ok = read_lines(&r, text);
  if (ok)
    ok = copy_value(&out->mode, r.vm_mode ? r.vm_mode : r.defaults_mode,
                    r.vm_mode ? r.vm_mode_len : r.defaults_mode_len) &&
         copy_value(&out->qemu, r.vm_qemu ? r.vm_qemu : r.defaults_qemu,
                    r.vm_qemu ? r.vm_qemu_len : r.defaults_qemu_len);
  free(text);
  if (!ok)
    qp_front_config_clear(out);
  return ok;
}

void
qp_front_config_clear(QpFrontConfig *c)
{
  free(c->mode);
  free(c->qemu);
  *c = (QpFrontConfig){0};
}
