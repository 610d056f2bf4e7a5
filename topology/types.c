/* Constructors, destructors and names of the planner's data types. */
#include "topology/plan.h"

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

void
qp_request_free(QpRequest *req)
{
  if (req == NULL)
    return;
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
  g_free(req->gdistance);
  g_strfreev(req->vfio);
  g_ptr_array_unref(req->io);
  g_free(req);
}

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
