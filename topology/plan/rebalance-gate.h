/* The hysteresis of a periodic rebalance (`qemu-pin rebalance
 * --rebalance-min-mib`): whether the moves qp_rebalance_compute() planned
 * are worth making. numad moves a process only when it would gain by a
 * threshold; here the gain is the memory the moves bring onto the one node
 * of a VM that spanned, which is also what they copy. Pure, like the
 * planner. */
#pragma once

#include <glib.h>

#include "topology/plan/rebalance.h"

G_BEGIN_DECLS

/* MiB that R's consolidating moves (goal (a)) bring onto their VM's node,
 * and that its moves off an overcommitted node (goal (c)) take off it. */
guint64 qp_rebalance_gain(const QpRebalance *r);

/* TRUE when R moves a VM off an overcommitted node (goal (c)), or brings
 * at least one spanning VM onto one node and its gain is at least MIN_MIB
 * (0: any such move is worth it). */
gboolean qp_rebalance_worth(const QpRebalance *r, guint64 min_mib);

G_END_DECLS
