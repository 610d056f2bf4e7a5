/* The guest side of device locality: a device whose host node is known
 * goes, in the guest, on the guest node mapped to that host node, through
 * a NUMA-aware expander bus (pxb-pcie with a root port on q35, pxb on pc)
 * that qemu-pin adds. Only for a PCI -device the caller gave no bus= or
 * addr= of its own and no other device hangs off; only when the guest has
 * nodes placed per host node (numa, one-to-one, --vnuma=auto) and the
 * caller made no expander bus of its own. */
#pragma once

#include "launcher/qemu/args.h"

G_BEGIN_DECLS

/* Adds to TAIL ("-device", value pairs, to append after the caller's
 * arguments, in order) the expander buses and the moved devices, and to
 * DROP (of guint) the argv indexes of the moved devices' -device and value.
 * VNODES: the rewrite made the guest nodes of plan->vnodes. */
void qp_device_buses(const QpQemuArgs *a, const QpPlan *plan, gboolean vnodes,
                     GPtrArray *tail, GArray *drop);

/* One warning line when devices the caller put on a bus of its own (an
 * expander with numa_node=) sit in the guest on a node whose host node is
 * not the device's; else NULL. */
char *qp_device_buses_warning(const QpQemuArgs *a, const QpPlan *plan);

G_END_DECLS
