/* The guest's devices with a host side in the plan, and the iothreads that
 * serve them placed on those devices' node (topology/plan/devices.c). */
#pragma once

#include "topology/plan/internal.h"

G_BEGIN_DECLS

/* Fills plan->devices (every vfio, storage and network device and its
 * host node) and plan->iothreads: an iothread that serves devices of one
 * known node runs on that node's usable CPUs (A) off the VM's dedicated
 * cores, unless --device-locality=ignore. Adds those CPUs to the process
 * CPUs. Called once the plan's other CPU sets are final. */
void qp_plan_devices(QpPlan *plan, const Ctx *ctx, const Attempt *a);

G_END_DECLS
