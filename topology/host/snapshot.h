/* A snapshot of the live host's shape in the state directory, so that a
 * launch does not discover the host with hwloc every time, nor import
 * hwloc's XML of it.
 *
 * The snapshot (DIR/.host-snapshot, named by topology/base/state-dir.h) is
 * what hwloc's live topology makes of the host (qp_host_load_live_static():
 * nodes, CPUs, cores, kinds, cache domains, distances, hwloc's allowed CPUs
 * and nodes), in qemu-pin's own text (topology/host/snapshot-text.h), headed
 * by the key it is valid for: the boot id, the online CPUs and nodes, this
 * process's allowed CPUs and memory nodes, and the versions of qemu-pin and
 * hwloc. A snapshot with another key or format, cut short or damaged is
 * ignored and written anew. What changes while the host runs is read live on
 * every load from a snapshot, as a live load reads it: free memory, hugepage
 * pools, this process's CPUs and the isolated CPUs (qp_host_apply_live()),
 * but for the zones' watermark figures, kept beside the snapshot
 * (NAME.watermarks, this user's own as the snapshot is) under a key of their
 * own (topology/host/node-memory.h). */
#pragma once

#include <glib.h>

#include "topology/host/host.h"

G_BEGIN_DECLS

/* The live host, through the snapshot in DIR when it is valid; else loaded
 * with hwloc, and the snapshot written to DIR (when DIR is a directory of
 * this user that others cannot write; failing that is silent). WITH_IO
 * (PCI devices wanted) always loads live and leaves the snapshot alone. */
QpHost *qp_host_load_snapshot(const char *dir, gboolean with_io,
                              GError **error);

/* The key a snapshot made now would carry (for tests); NULL when the boot
 * id cannot be read (no snapshot is then used or written). */
char *qp_host_snapshot_key(void);

G_END_DECLS
