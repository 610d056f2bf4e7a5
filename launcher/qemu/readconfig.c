#include "launcher/qemu/readconfig.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>

#include "launcher/qemu/args.h"

void
qp_config_section_free(QpConfigSection *section)
{
  if (section == NULL)
    return;
  g_free(section->group);
  g_free(section->id);
  g_ptr_array_unref(section->keys);
  g_ptr_array_unref(section->values);
  g_free(section);
}

static QpConfigSection *
section_new(const char *group, const char *id, guint line)
{
  QpConfigSection *s = g_new0(QpConfigSection, 1);
  s->group = g_strdup(group);
  s->id = g_strdup(id);
  s->line = line;
  s->keys = g_ptr_array_new_with_free_func(g_free);
  s->values = g_ptr_array_new_with_free_func(g_free);
  return s;
}

static void
close_fp(FILE *fp)
{
  fclose(fp);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FILE, close_fp)

GPtrArray *
qp_readconfig_read(const char *path, GError **error)
{
  /* A pipe or a device (-readconfig /dev/stdin) would be read away from
   * QEMU, or block: only a regular file is read here. */
  struct stat st;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
    g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                "is not a regular file (it is left to QEMU alone)");
    return NULL;
  }
  g_autoptr(FILE) fp = fopen(path, "r");
  if (fp == NULL) {
    int saved = errno;
    g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(saved),
                "cannot be opened: %s", g_strerror(saved));
    return NULL;
  }
  g_autoptr(GPtrArray) sections =
      g_ptr_array_new_with_free_func((GDestroyNotify)qp_config_section_free);
  /* The buffers and the sscanf() patterns are QEMU's own, so that a line is
   * split, matched and refused exactly where QEMU does it: a key matched
   * before a failed '= "' still counts (as a key with an empty value). */
  char line[1024], group[64], arg[64], value[1024];
  QpConfigSection *current = NULL;
  guint lno = 0;
  while (fgets(line, sizeof(line), fp) != NULL) {
    ++lno;
    if (line[0] == '\n' || line[0] == '#')
      continue;
    if (line[0] == '[') {
      if (sscanf(line, "[%63s \"%63[^\"]\"]", group, value) == 2) {
        current = section_new(group, value, lno);
        g_ptr_array_add(sections, current);
        continue;
      }
      if (sscanf(line, "[%63[^]]]", group) == 1) {
        current = section_new(group, NULL, lno);
        g_ptr_array_add(sections, current);
        continue;
      }
    }
    value[0] = '\0';
    if (sscanf(line, " %63s = \"%1023[^\"]\"", arg, value) == 2 ||
        sscanf(line, " %63s = \"\"", arg) == 1) {
      if (current == NULL) {
        g_set_error(error, QP_ARGS_ERROR, QP_ARGS_ERROR_INVALID,
                    "-readconfig %s:%u: no group defined: a key needs a "
                    "[group] line above it",
                    path, lno);
        return NULL;
      }
      g_ptr_array_add(current->keys, g_strdup(arg));
      g_ptr_array_add(current->values, g_strdup(value));
      continue;
    }
    g_set_error(error, QP_ARGS_ERROR, QP_ARGS_ERROR_INVALID,
                "-readconfig %s:%u: parse error: expected [group], "
                "key = \"value\", an empty line or a # comment",
                path, lno);
    return NULL;
  }
  if (ferror(fp)) {
    int saved = errno;
    g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(saved),
                "cannot be read: %s", g_strerror(saved));
    return NULL;
  }
  return g_steal_pointer(&sections);
}
