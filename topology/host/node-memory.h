/* What the kernel can give on each node now, without swapping or killing:
 * the kernel's si_mem_available() per node, from the node's meminfo, the
 * node's zones in /proc/zoneinfo and, when ZFS is loaded, its ARC above
 * c_min (/proc/spl/kstat/zfs/arcstats). All files are read under a root
 * ("" for the host itself; HWLOC_FSROOT when set, as hwloc does, so that a
 * recorded host's files serve tests). */
#pragma once

#include <glib.h>

#include "topology/host/host.h"

G_BEGIN_DECLS

/* One node's figures, in KiB. */
typedef struct {
  int node;
  gboolean read;           /* its meminfo was read */
  guint64 total_kib;       /* MemTotal */
  guint64 free_kib;        /* MemFree */
  guint64 file_kib;        /* Active(file) + Inactive(file) */
  guint64 reclaimable_kib; /* KReclaimable (else SReclaimable) */
  guint64 unaccounted_kib; /* used by no counter meminfo has (ZFS's ARC) */
  guint64 pools_kib;       /* in its hugepage pools (set by the caller) */
  guint64 low_kib;         /* sum of its zones' low watermarks */
  guint64 reserve_kib;     /* sum of its zones' high watermark + lowmem
                              reserve, at most each zone's managed pages */
  guint64 arc_kib;         /* its share of ZFS's ARC above c_min */
} QpNodeKernelMemory;

/* Parses a node's meminfo (TEXT) into OUT; FALSE when it has no MemTotal
 * and MemFree. */
gboolean qp_node_meminfo_parse(const char *text, QpNodeKernelMemory *out);

/* Adds the watermarks of /proc/zoneinfo (TEXT, pages of PAGE_KIB) to the N
 * nodes of OUT (by their node). */
void qp_zoneinfo_parse(const char *text, guint64 page_kib,
                       QpNodeKernelMemory *out, guint n);

/* ZFS's ARC above its minimum (size - c_min) in arcstats TEXT, in KiB; 0
 * when TEXT has neither. */
guint64 qp_arcstats_reclaimable_kib(const char *text);

/* Shares ARC_KIB over the N nodes of OUT in proportion to the memory each
 * uses that no meminfo counter explains (where the ARC's pages are), at
 * most that much on each. */
void qp_arc_share(guint64 arc_kib, QpNodeKernelMemory *out, guint n);

/* What the kernel can give on the node now: free less its reserve, plus
 * page cache and reclaimable slab less what the kernel keeps of each (half,
 * up to the low watermark), plus its share of the ARC (si_mem_available()
 * per node). */
guint64 qp_node_kernel_can_give_kib(const QpNodeKernelMemory *m);

/* Reads the files under ROOT for the N nodes of OUT (node and pools_kib
 * set by the caller). */
void qp_node_kernel_memory_read(const char *root, QpNodeKernelMemory *out,
                                guint n);

/* The live host's nodes: total, free, what the kernel can give and what is
 * used (QpNode.measured and the fields after it), read now. */
void qp_host_read_node_memory(QpHost *host);

G_END_DECLS
