/* The guest's memory model: what QEMU 7.2 allocates for a command line,
 * piece by piece, with the page size of each piece.
 *
 * - The RAM (-m size) comes from -machine memory-backend=, from the
 *   backends of -numa node,memdev=, or is QEMU's own (anonymous memory, or
 *   a file in -mem-path). -m maxmem and slots allocate nothing.
 * - pc-dimm, nvdimm and virtio-pmem-pci map their whole backend;
 *   virtio-mem-pci maps its backend but the guest may use only
 *   requested-size of it (QEMU accepts a requested-size above the backend
 *   size at start and caps what the guest can plug at the backend size).
 *   A device without node= is on guest node 0 (QEMU's default).
 * - A backend no node or device uses takes memory at start only when it
 *   preallocates, or when its hugepages are reserved (hugetlb and
 *   reserve=on, the default): QEMU maps it at start and the kernel
 *   reserves hugetlb pages at mmap.
 * - A backend on device DAX or on a DAX filesystem is not host RAM, and
 *   memory-backend-epc (SGX) is no RAM of the node either: neither is
 *   bound nor claimed. Nor is a file backend with readonly=on outside
 *   hugetlbfs (Kata Containers' guest image on an nvdimm): QEMU maps the
 *   file read-only, so its pages are the file's own clean page cache,
 *   one copy for every VM that maps it, which the kernel drops under
 *   pressure and no guest can dirty; claiming it would count that one
 *   image again for each VM.
 * - A backend used by another device (ivshmem-plain, memory shared with
 *   other VMs or processes) is that device's: neither bound nor claimed.
 * - A backend used twice, or a device naming no backend: QEMU refuses the
 *   command line, the first user counts and QEMU says what is wrong. */
#include "launcher/qemu/memory.h"

#include <string.h>

#include "launcher/qemu/backends.h"
#include "launcher/qemu/numbers.h"
#include "launcher/qemu/props.h"

/* ---- backends --------------------------------------------------------- */

void
qp_backend_classify(QpBackend *b)
{
  if (strcmp(b->qom_type, "memory-backend-memfd") == 0) {
    if (b->hugetlb && b->hugetlbsize_kib == 0)
      b->hugetlbsize_kib = qp_default_hugepage_kib();
    b->page_kib = b->hugetlb ? b->hugetlbsize_kib : 0;
    return;
  }
  if (strcmp(b->qom_type, "memory-backend-file") != 0 || b->mem_path == NULL)
    return;
  guint64 page = qp_hugetlbfs_page_kib(b->mem_path);
  if (page != 0) {
    b->hugetlb = TRUE;
    b->hugetlbsize_kib = b->page_kib = page;
  }
  QpMemFile file;
  if (qp_mem_file_stat(b->mem_path, &file)) {
    b->dax = file.dax;
    if (b->size_bytes == 0 && file.size_bytes > 0) {
      b->size_bytes = file.size_bytes;
      b->size_mib = qp_bytes_to_mib(b->size_bytes);
    }
  }
}

gboolean
qp_backend_is_ram(const QpBackend *b)
{
  return !b->dax && !(b->readonly && !b->hugetlb) &&
         strcmp(b->qom_type, "memory-backend-epc") != 0;
}

/* Whether a node of HOST has hugepages of PAGE_KIB; *ANY says whether it
 * has any size at all, SIZES lists them ("2048 KiB, 1048576 KiB"). */
static gboolean
host_has_page(const QpHost *host, guint64 page_kib, gboolean *any,
              GString *sizes)
{
  gboolean found = FALSE;
  g_autoptr(GArray) seen = g_array_new(FALSE, FALSE, sizeof(guint64));
  for (guint i = 0; i < host->n_nodes; i++) {
    const GArray *pools = host->nodes[i].hugepages;
    for (guint k = 0; pools != NULL && k < pools->len; k++) {
      guint64 kib = g_array_index(pools, QpHugePool, k).page_kib;
      found = found || kib == page_kib;
      gboolean listed = FALSE;
      for (guint j = 0; j < seen->len; j++)
        listed = listed || g_array_index(seen, guint64, j) == kib;
      if (listed)
        continue;
      g_array_append_val(seen, kib);
      g_string_append_printf(sizes, "%s%" G_GUINT64_FORMAT " KiB",
                             sizes->len ? ", " : "", kib);
    }
  }
  *any = seen->len > 0;
  return found;
}

gboolean
qp_backends_page_sizes_check(const QpQemuArgs *a, const QpHost *host,
                             GError **error)
{
  for (guint i = 0; i < a->backends->len; i++) {
    const QpBackend *b = g_ptr_array_index(a->backends, i);
    /* Without hugetlbsize=, the default size: the host's own. */
    if ((b->memfd_flags >> QP_MFD_HUGE_SHIFT) == 0)
      continue;
    gboolean any;
    g_autoptr(GString) sizes = g_string_new(NULL);
    if (host_has_page(host, b->page_kib, &any, sizes) || !any)
      continue;
    return qp_args_invalid(
        error,
        "-object memory backend '%s': hugetlbsize %" G_GUINT64_FORMAT
        " KiB is not a hugepage size of this host: expected "
        "%s (QEMU: failed to create memfd with flags 0x%x: "
        "No such device)",
        b->id, b->page_kib, sizes->str, b->memfd_flags);
  }
  return TRUE;
}

/* ---- memory devices --------------------------------------------------- */

typedef struct {
  QpMemKind kind;
  gboolean other; /* another device with memdev= (ivshmem-plain, ...) */
  char *id;
  char *memdev;
  guint64 node;      /* 0 when unset or unreadable */
  guint64 requested; /* virtio-mem requested-size in bytes */
} MemDevice;

static void
mem_device_clear(MemDevice *d)
{
  g_free(d->id);
  g_free(d->memdev);
}

static gboolean
device_kind(const char *driver, QpMemKind *kind)
{
  static const struct {
    const char *driver;
    QpMemKind kind;
  } drivers[] = {
      {"pc-dimm", QP_MEM_DIMM},
      {"nvdimm", QP_MEM_NVDIMM},
      {"virtio-mem-pci", QP_MEM_VIRTIO_MEM},
      {"virtio-pmem-pci", QP_MEM_VIRTIO_PMEM},
  };
  for (guint i = 0; driver != NULL && i < G_N_ELEMENTS(drivers); i++)
    if (strcmp(drivers[i].driver, driver) == 0) {
      *kind = drivers[i].kind;
      return TRUE;
    }
  return FALSE;
}

/* The memory device of the -device value TEXT, or another device naming a
 * backend (OTHER); FALSE for a device without memdev=. A value QEMU cannot
 * read counts as 0 (QEMU refuses it). D is to clear either way. */
static gboolean
parse_mem_device(const char *text, MemDevice *d)
{
  g_auto(QpProps) p = {0};
  memset(d, 0, sizeof(*d));
  if (!qp_props_read(&p, "-device", text, "driver", NULL))
    return FALSE;
  d->other = !device_kind(qp_props_string(&p, "driver"), &d->kind);
  d->id = g_strdup(qp_props_string(&p, "id"));
  d->memdev = g_strdup(qp_props_string(&p, "memdev"));
  if (d->other)
    return d->memdev != NULL;
  d->node = qp_props_uint_or_zero(&p, "node");
  d->requested = qp_props_size_or_zero(&p, "requested-size");
  return TRUE;
}

/* ---- the model -------------------------------------------------------- */

static void
add_devmem(QpRequest *r, QpMemKind kind, int gnode, const char *device,
           const QpBackend *b, guint64 bytes)
{
  r->devmem = g_renew(QpMemDevice, r->devmem, r->n_devmem + 1);
  QpMemDevice *m = &r->devmem[r->n_devmem++];
  memset(m, 0, sizeof(*m));
  m->kind = kind;
  m->gnode = gnode;
  m->device = g_strdup(device);
  m->memdev = g_strdup(b->id);
  m->mib = qp_bytes_to_mib(bytes);
  m->page_kib = b->page_kib;
  m->host_nodes = b->host_nodes ? hwloc_bitmap_dup(b->host_nodes) : NULL;
  m->policy = b->policy;
}

void
qp_memory_model(QpQemuArgs *a, GPtrArray *devices)
{
  const char *mem_path = a->mem_path;
  QpRequest *r = a->req;
  g_autoptr(GHashTable) used = g_hash_table_new(g_str_hash, g_str_equal);
  guint64 path_page = mem_path != NULL ? qp_hugetlbfs_page_kib(mem_path) : 0;

  /* The RAM. */
  if (r->n_gnodes == 0) {
    const QpBackend *b = qp_backend_find(a, a->machine_memdev);
    r->page_kib = b != NULL ? b->page_kib : path_page;
    if (b != NULL) {
      g_hash_table_add(used, b->id);
      r->host_nodes = b->host_nodes ? hwloc_bitmap_dup(b->host_nodes) : NULL;
      r->policy = b->policy;
      r->memdev = g_strdup(b->id);
    }
  }
  for (guint g = 0; g < r->n_gnodes; g++) {
    QpGuestNode *gn = &r->gnodes[g];
    const QpBackend *b = qp_backend_find(a, gn->memdev);
    gn->page_kib = b != NULL ? b->page_kib : path_page;
    if (b != NULL)
      g_hash_table_add(used, b->id);
  }

  /* Memory devices plugged at start. */
  for (guint i = 0; devices != NULL && i < devices->len; i++) {
    MemDevice d;
    gboolean uses_backend = parse_mem_device(devices->pdata[i], &d);
    QpBackend *b = uses_backend ? qp_backend_find(a, d.memdev) : NULL;
    if (b != NULL && !g_hash_table_contains(used, b->id)) {
      g_hash_table_add(used, b->id);
      guint64 bytes = b->size_bytes;
      if (d.kind == QP_MEM_VIRTIO_MEM)
        bytes = MIN(d.requested, bytes);
      int gnode = r->n_gnodes == 0 ? -1 : (int)MIN(d.node, G_MAXINT);
      if (qp_backend_is_ram(b) && !d.other)
        add_devmem(r, d.kind, gnode, d.id, b, bytes);
    }
    mem_device_clear(&d);
  }

  /* Backends no one uses: bound with guest node 0's RAM, claimed when
   * they take memory at start: preallocated, hugepages reserved, or every
   * page locked in (-overcommit mem-lock=on: QEMU's mlockall() makes each
   * mapping resident as it is made). */
  for (guint i = 0; i < a->backends->len; i++) {
    QpBackend *b = g_ptr_array_index(a->backends, i);
    if (g_hash_table_contains(used, b->id) || !qp_backend_is_ram(b))
      continue;
    gboolean taken =
        b->prealloc || a->mem_lock || (b->page_kib != 0 && b->reserve);
    add_devmem(r, QP_MEM_UNUSED, r->n_gnodes == 0 ? -1 : 0, NULL, b,
               taken ? b->size_bytes : 0);
  }
}
