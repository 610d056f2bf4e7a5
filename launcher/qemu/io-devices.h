/* The guest's devices whose host side has a place on the host: storage
 * (-drive, -blockdev and the -device that uses them) and network backends
 * (-netdev tap and the -device that uses it), with the iothread that
 * serves each. */
#pragma once

#include "launcher/qemu/args.h"

G_BEGIN_DECLS

/* Adds the storage and network devices of OPTS (of QpOpt) to A->req->io,
 * the host PCI device behind each found under SYSFS ("/sys"). Never
 * fails: what cannot be followed has no host device, and QEMU judges the
 * options themselves. */
void qp_io_devices_read(QpQemuArgs *a, GArray *opts, const char *sysfs);

G_END_DECLS
