/* What the VM needs (see request.h): made and freed, and the names of
 * its memory kinds. */
#include "topology/plan/request.h"

QP_DEFINE_NAMES(mem_kind, QpMemKind, {"ram", QP_MEM_RAM},
                {"pc-dimm", QP_MEM_DIMM}, {"nvdimm", QP_MEM_NVDIMM},
                {"virtio-mem", QP_MEM_VIRTIO_MEM},
                {"virtio-pmem", QP_MEM_VIRTIO_PMEM}, {"unused", QP_MEM_UNUSED})

QpRequest *
qp_request_new(void)
{
  QpRequest *req = g_new0(QpRequest, 1);
  req->vcpus = 1;
  req->maxcpus = 1;
  req->sockets = req->dies = req->clusters = req->cores = req->threads = 1;
  req->modules = 1;
  req->mem_mib = 128; /* QEMU's default RAM size */
  req->io = g_ptr_array_new_with_free_func(qp_io_device_free);
  return req;
}

void
qp_io_device_free(gpointer p)
{
  QpIoDevice *d = p;
  g_free(d->what);
  g_free(d->bdf);
  g_free(d->iothread);
  g_free(d);
}

const QpMemDevice *
qp_request_virtio_mem(const QpRequest *req)
{
  for (guint i = 0; i < req->n_devmem; i++)
    if (req->devmem[i].kind == QP_MEM_VIRTIO_MEM)
      return &req->devmem[i];
  return NULL;
}

hwloc_bitmap_t
qp_request_boot_set(const QpRequest *req)
{
  if (req->boot != NULL)
    return hwloc_bitmap_dup(req->boot);
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  hwloc_bitmap_set_range(set, 0, (int)MAX(req->vcpus, 1) - 1);
  return set;
}

void
qp_request_free(QpRequest *req)
{
  if (req == NULL)
    return;
  hwloc_bitmap_free(req->boot);
  for (guint i = 0; i < req->n_gnodes; i++) {
    hwloc_bitmap_free(req->gnodes[i].vcpus);
    hwloc_bitmap_free(req->gnodes[i].host_nodes);
    g_free(req->gnodes[i].memdev);
  }
  g_free(req->gnodes);
  for (guint i = 0; i < req->n_devmem; i++) {
    g_free(req->devmem[i].device);
    g_free(req->devmem[i].memdev);
    hwloc_bitmap_free(req->devmem[i].host_nodes);
  }
  g_free(req->devmem);
  hwloc_bitmap_free(req->host_nodes);
  g_free(req->memdev);
  g_free(req->gdistance);
  g_strfreev(req->vfio);
  g_ptr_array_unref(req->io);
  g_free(req);
}
