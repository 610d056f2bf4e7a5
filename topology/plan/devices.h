/* The guest's devices with a host side in the plan, and the iothreads that
 * serve them placed on those devices' node (topology/plan/devices.c). */
#pragma once

#include "topology/plan/context.h"

G_BEGIN_DECLS

/* Fills plan->devices (every vfio, storage and network device and its
 * host node) and plan->iothreads: an iothread that serves devices of one
 * known node runs on that node's usable CPUs (A) off the VM's dedicated
 * cores, unless --device-locality=ignore. Adds those CPUs to the process
 * CPUs. Called once the plan's other CPU sets are final. */
void plan_devices(QpPlan *plan, const Ctx *ctx, const Attempt *a);

/* The plan's "devices" and "iothreads" members (docs/plan-schema.md). */
void plan_devices_json(JsonBuilder *b, const QpPlan *plan);
/* Their table in `plan --human`. */
void plan_devices_text(GString *s, const QpPlan *plan);

G_END_DECLS
