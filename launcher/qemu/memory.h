/* The guest's memory as QEMU 7.2 makes it, for placement: the RAM of each
 * guest node and its page size, the memory devices plugged at start
 * (pc-dimm, nvdimm, virtio-mem-pci, virtio-pmem-pci) and the memory
 * backends no one uses. What is claimed for each is in docs/design.md
 * ("Memory"). */
#pragma once

#include <glib.h>

#include "launcher/qemu/args.h"
#include "topology/host/host.h"
#include "topology/host/memory-files.h"

G_BEGIN_DECLS

/* Completes backend B from the host (topology/host/memory-files.h): its
 * page size (memfd with hugetlb, a file on hugetlbfs), whether its file is
 * device DAX or on a DAX filesystem, and the size of a file backend given
 * without size=. */
void qp_backend_classify(QpBackend *b);

/* Whether the memory of B (classified) is host RAM that qemu-pin places:
 * not on DAX, not SGX's EPC. */
gboolean qp_backend_is_ram(const QpBackend *b);

/* The page size a memfd backend's hugetlbsize= asks for must be one the
 * kernel of HOST has (a hugepages-NkB pool, empty or not): else
 * memfd_create() fails (ENODEV) and QEMU 7.2 refuses the backend. FALSE
 * with QEMU's message, naming the backend, the size and HOST's sizes;
 * TRUE when HOST lists no hugepage sizes at all (a recorded host without
 * them says nothing). */
gboolean qp_backends_page_sizes_check(const QpQemuArgs *args,
                                      const QpHost *host, GError **error);

/* Adds the memory model to ARGS->req: page sizes (of the backends, or of
 * -mem-path) and the caller's binding of the RAM, the memory devices of
 * DEVICES (the -device values, in order) and the unused backends. Never
 * fails: a device QEMU will refuse is planned conservatively and QEMU says
 * what is wrong. */
void qp_memory_model(QpQemuArgs *args, GPtrArray *devices);

G_END_DECLS
