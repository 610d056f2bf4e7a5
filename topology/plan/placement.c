/* What the user asks of qemu-pin (see placement.h): the names of its
 * options and their defaults. */
#include "topology/plan/placement.h"

#include <string.h>

QP_DEFINE_NAMES(policy, QpPolicy, {"default", QP_POLICY_DEFAULT},
                {"bind", QP_POLICY_BIND}, {"preferred", QP_POLICY_PREFERRED},
                {"interleave", QP_POLICY_INTERLEAVE})
QP_DEFINE_NAMES(strategy, QpStrategy, {"spread", QP_STRATEGY_SPREAD},
                {"pack", QP_STRATEGY_PACK})
QP_DEFINE_NAMES(smt, QpSmt, {"prefer", QP_SMT_PREFER},
                {"strict", QP_SMT_STRICT})
QP_DEFINE_NAMES(device_locality, QpDeviceLocality,
                {"preferred", QP_DEVLOC_PREFERRED},
                {"required", QP_DEVLOC_REQUIRED}, {"ignore", QP_DEVLOC_IGNORE})
void
qp_placement_options_init(QpPlacementOptions *opts)
{
  memset(opts, 0, sizeof(*opts));
  opts->mode = QP_MODE_AUTO;
  opts->strategy = QP_STRATEGY_SPREAD;
  opts->policy = QP_POLICY_BIND;
  opts->smt = QP_SMT_PREFER;
  opts->device_locality = QP_DEVLOC_PREFERRED;
}

void
qp_placement_options_clear(QpPlacementOptions *opts)
{
  g_clear_pointer(&opts->affinity, hwloc_bitmap_free);
  g_clear_pointer(&opts->hostnodes, hwloc_bitmap_free);
  g_clear_pointer(&opts->node_reserve, g_array_unref);
}
