/* What the VM needs, read from QEMU's argv: its vCPUs and guest topology,
 * its guest nodes, the pieces of its memory, its vfio devices and the host
 * devices behind its storage and network. */
#pragma once

#include <glib.h>
#include <hwloc.h>

#include "topology/base/cpulist.h"
#include "topology/plan/placement.h"

G_BEGIN_DECLS

typedef struct {
  int id;                    /* guest node id (-numa node,nodeid=) */
  hwloc_bitmap_t vcpus;      /* vCPU indexes (cpu-index) of the node */
  guint64 mem_mib;           /* its RAM (its share of -m) */
  char *memdev;              /* backend id, NULL if none */
  hwloc_bitmap_t host_nodes; /* caller's host-nodes, NULL if unset */
  QpPolicy policy;           /* caller's policy, DEFAULT if unset */
  guint64 page_kib;          /* page size of its RAM, 0: ordinary memory */
} QpGuestNode;

/* What a piece of guest memory is. */
typedef enum {
  QP_MEM_RAM,         /* initial RAM (-m) of a guest node, or of the guest */
  QP_MEM_DIMM,        /* -device pc-dimm */
  QP_MEM_NVDIMM,      /* -device nvdimm */
  QP_MEM_VIRTIO_MEM,  /* -device virtio-mem-pci */
  QP_MEM_VIRTIO_PMEM, /* -device virtio-pmem-pci */
  QP_MEM_UNUSED,      /* a memory backend no node or device uses (yet) */
} QpMemKind;

/* "ram", "pc-dimm", "nvdimm", "virtio-mem", "virtio-pmem", "unused" */
const char *qp_mem_kind_name(QpMemKind kind);
gboolean qp_mem_kind_parse(const char *text, QpMemKind *out);

/* Guest memory beyond the RAM of the guest nodes: a memory device plugged
 * at start, or a backend no one uses yet (docs/design.md, "Memory"). */
typedef struct {
  QpMemKind kind;
  int gnode;                 /* index into gnodes; -1 without vNUMA */
  char *device;              /* the device's id, NULL if none */
  char *memdev;              /* backend id */
  guint64 mib;               /* to claim now (0: bound only) */
  guint64 page_kib;          /* 0: ordinary memory, else the hugepage size */
  hwloc_bitmap_t host_nodes; /* caller's host-nodes, NULL if unset */
  QpPolicy policy;           /* caller's policy, DEFAULT if unset */
} QpMemDevice;

/* A device whose host side is a resource with a place on the host: storage
 * behind -drive/-blockdev, a network backend with a physical port. */
typedef struct {
  char *what;     /* "virtio-blk-pci disk0 (/dev/nvme0n1)" */
  char *bdf;      /* the host PCI device behind it, NULL when not found */
  char *iothread; /* the iothread that serves it, NULL when none */
} QpIoDevice;

typedef struct {
  guint vcpus;   /* boot vCPUs */
  guint maxcpus; /* >= vcpus */
  /* With vCPUs plugged by -device at start (libvirt's hot-pluggable vCPUs
   * enabled at boot), the cpu-indexes of every boot vCPU: such a vCPU
   * fills the slot its ids name, which may leave a hole below it. NULL
   * without them: the boot vCPUs are 0 to vcpus - 1. */
  hwloc_bitmap_t boot;
  /* The planner's own, for a request of the boot vCPUs alone renumbered
   * from 0: its vCPU K is the caller's vCPU slot_of[K] (what the plan's
   * words name). NULL: K itself. */
  const guint *slot_of;
  guint sockets, dies, clusters, cores, threads;
  guint modules;   /* x86's level between die and core, QEMU 9.1 and later */
  guint64 mem_mib; /* initial RAM (-m) */
  guint n_gnodes;  /* 0: no vNUMA */
  QpGuestNode *gnodes;
  guint *gdistance; /* n_gnodes * n_gnodes from -numa dist, or NULL */
  gboolean prealloc;
  char **vfio; /* NULL-terminated host BDFs of -device vfio-pci */
  guint n_iothreads;
  GPtrArray *io; /* of QpIoDevice*: storage and network devices */
  /* The RAM of a guest without vNUMA: its page size (0: ordinary memory)
   * and the caller's binding of its -machine memory-backend. */
  guint64 page_kib;
  hwloc_bitmap_t host_nodes; /* NULL if unset */
  QpPolicy policy;
  char *memdev; /* that backend's id, NULL when QEMU or qemu-pin makes it */
  guint n_devmem;
  QpMemDevice *devmem;
  guint64 maxmem_mib; /* -m maxmem, 0 if unset: memory can be plugged later */
} QpRequest;

QpRequest *qp_request_new(void);
void qp_io_device_free(gpointer d);
void qp_request_free(QpRequest *req);

/* The first virtio-mem device of REQ (its memory is resized while the VM
 * runs), or NULL. */
const QpMemDevice *qp_request_virtio_mem(const QpRequest *req);

/* The cpu-indexes of REQ's boot vCPUs (REQ->boot, else 0 to vcpus - 1), a
 * new bitmap. */
hwloc_bitmap_t qp_request_boot_set(const QpRequest *req);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QpRequest, qp_request_free)

G_END_DECLS
