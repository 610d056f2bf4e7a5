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

/* The watermark figures (low_kib, reserve_kib) of every node, kept from an
 * earlier read of /proc/zoneinfo: a launch needs nothing else of that file,
 * which has 7 lines per possible CPU in every populated zone (hundreds of
 * KB on a 256-CPU host). The kernel computes the watermarks anew only when
 * vm.min_free_kbytes, vm.watermark_scale_factor or vm.lowmem_reserve_ratio
 * is written (khugepaged raises min_free_kbytes through the same file) or a
 * zone's managed pages change (memory hotplug, a balloon: the node's
 * MemTotal changes with them), so the figures are kept under a key of those
 * three files, every node's MemTotal and the kernel (uname). The kept text:
 *
 *   qemu-pin-watermarks 1
 *   kernel <release> <version>
 *   min_free_kbytes <the file's text>
 *   watermark_scale_factor <the file's text>
 *   lowmem_reserve_ratio <the file's text>
 *   total <node> <MemTotal KiB>                  per node, in OUT's order
 *   node <node> <low KiB> <reserve KiB>          per node, in OUT's order
 *   end <FNV-1a 64 of everything above, 16 hex digits>
 *
 * Anything else, and the text is not used. */
/* More than the kept text of any host (a line per node). */
#define QP_WATERMARKS_MAX_BYTES (1024 * 1024)

typedef struct QpWatermarkCache {
  const char *kept; /* in: the text kept, or NULL */
  gboolean used;    /* out: the kept figures were used, zoneinfo not read */
  char *fresh;      /* out: when zoneinfo was read under a key, the text to
                       keep (the caller frees it); else NULL */
} QpWatermarkCache;

/* The key of the watermark figures under ROOT for the N nodes of OUT
 * (their meminfo read): the kernel, the three sysctl files' text and every
 * node's MemTotal (the key's lines of the kept text); NULL when a file
 * cannot be read or a node's meminfo was not. */
char *qp_watermarks_key(const char *root, const QpNodeKernelMemory *out,
                        guint n);

/* The kept text of the figures of the N nodes of M under KEY. */
char *qp_watermarks_format(const char *key, const QpNodeKernelMemory *m,
                           guint n);

/* Sets low_kib and reserve_kib of the N nodes of OUT from TEXT when it is
 * a whole kept text under KEY of those nodes; else FALSE, OUT untouched. */
gboolean qp_watermarks_parse(const char *text, const char *key,
                             QpNodeKernelMemory *out, guint n);

/* Reads the files under ROOT for the N nodes of OUT (node and pools_kib
 * set by the caller). With CACHE (may be NULL), the kept figures are used
 * when their key is the files' now, and /proc/zoneinfo is not read; else it
 * is, and CACHE->fresh is what to keep. */
void qp_node_kernel_memory_read(const char *root, QpNodeKernelMemory *out,
                                guint n, QpWatermarkCache *cache);

/* The live host's nodes: total, free, what the kernel can give and what is
 * used (QpNode.measured and the fields after it), read now, with the
 * watermark figures of CACHE (may be NULL) as qp_node_kernel_memory_read()
 * says. Under HWLOC_FSROOT (a recorded host's files) CACHE is left alone:
 * the files there are read, and nothing is kept. */
void qp_host_read_node_memory(QpHost *host, QpWatermarkCache *cache);

G_END_DECLS
