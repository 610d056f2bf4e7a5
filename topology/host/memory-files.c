/* What the host makes of a file that backs guest memory (see
 * memory-files.h): read live, each time it is asked. */
#include "topology/host/memory-files.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>

#define HUGETLBFS_MAGIC_ 0x958458f6

guint64
qp_default_hugepage_kib(void)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents("/proc/meminfo", &text, NULL, NULL))
    return 2048;
  const char *p = strstr(text, "Hugepagesize:");
  guint64 kib = 0;
  if (p == NULL || sscanf(p, "Hugepagesize: %" G_GUINT64_FORMAT, &kib) != 1)
    return 2048;
  return kib;
}

/* statfs of PATH, or of its directory when PATH does not exist yet (QEMU
 * creates a missing mem-path file). */
static gboolean
statfs_path(const char *path, struct statfs *fs)
{
  if (path == NULL)
    return FALSE;
  if (statfs(path, fs) == 0)
    return TRUE;
  g_autofree char *dir = g_path_get_dirname(path);
  return statfs(dir, fs) == 0;
}

guint64
qp_hugetlbfs_page_kib(const char *path)
{
  struct statfs fs;
  if (!statfs_path(path, &fs) ||
      (unsigned long)fs.f_type != (unsigned long)HUGETLBFS_MAGIC_)
    return 0;
  return (guint64)fs.f_bsize / 1024;
}

/* TRUE when the filesystem of device DEV is mounted with DAX (the "dax" or
 * "dax=always" option of ext4 and xfs). */
static gboolean
mounted_dax(dev_t dev)
{
  g_autofree char *text = NULL;
  if (!g_file_get_contents("/proc/self/mountinfo", &text, NULL, NULL))
    return FALSE;
  g_autofree char *want = g_strdup_printf("%u:%u", major(dev), minor(dev));
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++) {
    g_auto(GStrv) f = g_strsplit(lines[i], " ", -1);
    if (g_strv_length(f) < 6 || strcmp(f[2], want) != 0)
      continue;
    /* Mount options (field 6), then after "-": type, source, options. */
    for (guint k = 5; f[k] != NULL; k++) {
      g_auto(GStrv) opts = g_strsplit(f[k], ",", -1);
      for (guint o = 0; opts[o] != NULL; o++)
        if (strcmp(opts[o], "dax") == 0 || strcmp(opts[o], "dax=always") == 0)
          return TRUE;
    }
  }
  return FALSE;
}

gboolean
qp_mem_file_stat(const char *path, QpMemFile *out)
{
  struct stat st;
  *out = (QpMemFile){0};
  if (path == NULL || stat(path, &st) != 0)
    return FALSE;
  /* Device DAX is a character device (/dev/daxN.M). */
  out->dax = S_ISCHR(st.st_mode) || mounted_dax(st.st_dev);
  if (S_ISREG(st.st_mode) && st.st_size > 0)
    out->size_bytes = (guint64)st.st_size;
  return TRUE;
}
