/* -device: the host PCI devices passed through (vfio-pci, with host= or
 * sysfsdev=, mediated devices included), whose locality placement weighs,
 * and the vCPUs plugged at start (x86 CPUs, ppc64 spapr cores), which run
 * from the start in the slots their ids name. */
#pragma once

#include "launcher/qemu/args.h"

G_BEGIN_DECLS

/* Reads the vfio-pci devices of OPTS (of QpOpt) into A->req->vfio, the
 * vCPUs plugged at start into A->req->vcpus and A->req->boot, and adds
 * every -device value to DEVICES (of const char*, for the memory model). */
gboolean qp_devices_read(QpQemuArgs *a, GArray *opts, GPtrArray *devices,
                         GError **error);

G_END_DECLS
