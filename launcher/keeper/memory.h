/* The keeper's watch over guest memory plugged while the VM runs: memory
 * devices added or removed on the caller's own monitor (object-add and
 * device_add of pc-dimm, nvdimm, virtio-mem-pci, virtio-pmem-pci;
 * device_del and object-del), and virtio-mem devices asked for another
 * requested-size. QEMU 7.2 has no event for a device added, so the keeper
 * looks (query-memdev, query-memory-devices on its private monitor) on a
 * timer and on the events that follow memory changes. What grew is claimed
 * in the VM's ledger record where the memory is bound; what left is given
 * back; what does not fit is said in the keeper's log. */
#pragma once

#include <glib.h>

#include "launcher/keeper/keeper.h"
#include "qmp/qmp.h"

G_BEGIN_DECLS

typedef struct QpMemWatch QpMemWatch;

/* Learns the backends QEMU has now: the plan claimed those. What changes
 * later is claimed in CLAIM (the keeper's, borrowed), more memory where
 * *PLAN (the keeper's plan of the moment: a move changes it) puts the RAM. NULL
 * (and a line in the log) when QEMU cannot say. */
QpMemWatch *qp_mem_watch_new(const QpKeeperConfig *cfg,
                             const QpPlan *const *plan, QpHeldClaim *claim,
                             QpQmp *qmp);

/* Looks again and claims or gives back what changed. */
void qp_mem_watch_update(QpMemWatch *w, QpQmp *qmp);

/* The id of a backend added after the start that the caller bound to host
 * nodes of its choosing (its host-nodes), or NULL: a VM qemu-pin does not
 * move. */
const char *qp_mem_watch_caller_bound(const QpMemWatch *w);

/* The request's memory devices (DEVMEM, of QpMemDevice, a copy of the
 * request's) as they are now: each holds what the keeper claims for its
 * backend (a virtio-mem device resized since), and the memory added after
 * the start is appended (VNUMA: the guest has nodes; its strings are W's).
 * A move plans them with the rest. */
void qp_mem_watch_request_devices(const QpMemWatch *w, gboolean vnuma,
                                  GArray *devmem);

/* After the plan changed (a move): what each backend holds is where the
 * new plan claims it, so that memory given back later leaves those nodes. */
void qp_mem_watch_rehome(QpMemWatch *w);

/* Events after which memory may have changed. */
gboolean qp_mem_watch_event(const char *name);

void qp_mem_watch_free(QpMemWatch *w);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QpMemWatch, qp_mem_watch_free)

G_END_DECLS
