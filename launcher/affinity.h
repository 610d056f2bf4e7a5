/* Where a thread may run and where a process's memory goes: the CPU
 * affinity of a thread and the memory policy of this process, as hwloc
 * bitmaps. The launcher confines QEMU with them before exec, the keeper
 * pins QEMU's threads. */
#pragma once

#include <glib.h>
#include <hwloc.h>

#include "topology/plan/plan.h"

G_BEGIN_DECLS

/* Pins thread TID (0: the calling thread) to SET. */
gboolean qp_set_affinity(int tid, hwloc_const_bitmap_t set, GError **error);

/* The CPUs thread TID may run on (a new bitmap), NULL when it is gone. */
hwloc_bitmap_t qp_get_affinity(int tid, GError **error);

/* Sets this process's memory policy: POLICY over NODES (preferred: the
 * first of them). */
gboolean qp_set_mempolicy(QpPolicy policy, hwloc_const_bitmap_t nodes,
                          GError **error);

G_END_DECLS
