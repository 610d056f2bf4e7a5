/* What the host makes of the files that back guest memory, read live: the
 * default hugepage size, the page size of a hugetlbfs file, whether a file
 * is device DAX or on a DAX filesystem, and its size. The QEMU command
 * line's memory model (launcher/qemu/memory.c) and the keeper ask. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The kernel's default hugepage size (Hugepagesize: of /proc/meminfo), in
 * KiB; 2048 when it cannot be read. */
guint64 qp_default_hugepage_kib(void);

/* Page size of the hugetlbfs PATH (a directory or a file in one, existing
 * or not) is on, 0 if PATH is not on hugetlbfs. */
guint64 qp_hugetlbfs_page_kib(const char *path);

/* A file that backs guest memory, as it is now. */
typedef struct {
  gboolean dax;       /* device DAX (/dev/daxN.M), or on a filesystem
                         mounted dax / dax=always */
  guint64 size_bytes; /* a regular file's size, 0 otherwise */
} QpMemFile;

/* Fills OUT for PATH; FALSE (OUT zeroed) when PATH is NULL or cannot be
 * stat()ed (QEMU creates a missing file). */
gboolean qp_mem_file_stat(const char *path, QpMemFile *out);

G_END_DECLS
