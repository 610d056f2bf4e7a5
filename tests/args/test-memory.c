/* The guest's memory model (launcher/qemu/memory.c) from QEMU command lines
 * in both syntaxes, and the plans made from it on the recorded hosts in
 * tests/data/topologies: every piece of memory with its page size, guest
 * node and claim; what QEMU refuses itself passes through. */
#include "launcher/qemu/args.h"
#include "launcher/qemu/rewrite.h"
#include "tests/common/qp-plan-test.h"
#include "topology/ledger/ledger.h"

#include <glib/gstdio.h>
#include <sched.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#define MiB (G_GUINT64_CONSTANT(1) << 20)

static QpQemuArgs *
parse_line(const char *line)
{
  g_auto(GStrv) argv = g_strsplit(line, " ", -1);
  g_autoptr(GError) error = NULL;
  QpQemuArgs *a =
      qp_qemu_args_parse(g_strv_length(argv), (char **)argv, &error);
  if (error != NULL)
    g_test_message("%s: %s", line, error->message);
  g_assert_no_error(error);
  g_assert_nonnull(a);
  g_assert_false(a->passthrough);
  return a;
}

static const QpMemDevice *
devmem(const QpQemuArgs *a, const char *memdev)
{
  for (guint i = 0; i < a->req->n_devmem; i++)
    if (g_strcmp0(a->req->devmem[i].memdev, memdev) == 0)
      return &a->req->devmem[i];
  return NULL;
}

static const QpPlanMem *
plan_mem(const QpPlan *p, const char *memdev)
{
  for (guint i = 0; i < p->n_mem; i++)
    if (g_strcmp0(p->mem[i].memdev, memdev) == 0)
      return &p->mem[i];
  return NULL;
}

static char *
list(hwloc_const_bitmap_t set)
{
  return set != NULL ? qp_list_format(set) : g_strdup("(null)");
}

/* ---- parsing --------------------------------------------------------------
 */

static void
test_devices_both_syntaxes(void)
{
  g_autoptr(QpQemuArgs) a = parse_line(
      "-m 2G,slots=4,maxmem=16G -smp 2 "
      "-object memory-backend-ram,id=r0,size=1G "
      "-object memory-backend-ram,id=r1,size=1G "
      "-numa node,nodeid=0,cpus=0,memdev=r0 "
      "-numa node,nodeid=1,cpus=1,memdev=r1 "
      "-object memory-backend-ram,id=d0,size=512M "
      "-device pc-dimm,id=dimm0,memdev=d0,node=1 "
      "-object {\"qom-type\":\"memory-backend-file\",\"id\":\"nv0\","
      "\"size\":268435456,\"mem-path\":\"/dev/shm\",\"share\":true,"
      "\"host-nodes\":[1],\"policy\":\"bind\"} "
      "-device {\"driver\":\"nvdimm\",\"id\":\"nvdimm0\",\"memdev\":\"nv0\","
      "\"node\":0} "
      "-object memory-backend-ram,id=v0,size=4G "
      "-device virtio-mem-pci,id=vmem0,memdev=v0,node=1,requested-size=1G "
      "-object memory-backend-file,id=p0,size=64M,mem-path=/dev/shm/p0 "
      "-device virtio-pmem-pci,memdev=p0,id=pmem0");
  const QpRequest *r = a->req;
  g_assert_cmpuint(r->maxmem_mib, ==, 16384);
  g_assert_cmpuint(r->n_devmem, ==, 4);

  const QpMemDevice *d = devmem(a, "d0");
  g_assert_nonnull(d);
  g_assert_cmpint(d->kind, ==, QP_MEM_DIMM);
  g_assert_cmpstr(d->device, ==, "dimm0");
  g_assert_cmpint(d->gnode, ==, 1);
  g_assert_cmpuint(d->mib, ==, 512);
  g_assert_cmpuint(d->page_kib, ==, 0);
  g_assert_null(d->host_nodes);

  const QpMemDevice *nv = devmem(a, "nv0");
  g_assert_nonnull(nv);
  g_assert_cmpint(nv->kind, ==, QP_MEM_NVDIMM);
  g_assert_cmpstr(nv->device, ==, "nvdimm0");
  g_assert_cmpint(nv->gnode, ==, 0);
  g_assert_cmpuint(nv->mib, ==, 256);
  g_autofree char *nvn = list(nv->host_nodes);
  g_assert_cmpstr(nvn, ==, "1");
  g_assert_cmpint(nv->policy, ==, QP_POLICY_BIND);

  /* virtio-mem: what the guest may plug now, not the backend's 4G. */
  const QpMemDevice *vm = devmem(a, "v0");
  g_assert_nonnull(vm);
  g_assert_cmpint(vm->kind, ==, QP_MEM_VIRTIO_MEM);
  g_assert_cmpint(vm->gnode, ==, 1);
  g_assert_cmpuint(vm->mib, ==, 1024);

  const QpMemDevice *pm = devmem(a, "p0");
  g_assert_nonnull(pm);
  g_assert_cmpint(pm->kind, ==, QP_MEM_VIRTIO_PMEM);
  g_assert_cmpint(pm->gnode, ==, 0);
  g_assert_cmpuint(pm->mib, ==, 64);

  /* The RAM itself is not a device. */
  g_assert_null(devmem(a, "r0"));
  g_assert_null(devmem(a, "r1"));
}

static void
test_virtio_mem_requested_size(void)
{
  /* Above the backend: QEMU 7.2 starts it and the guest gets at most the
   * backend; unset: 0. JSON sizes are numbers. */
  g_autoptr(QpQemuArgs) a =
      parse_line("-m 1G,maxmem=8G "
                 "-object memory-backend-ram,id=v0,size=1G "
                 "-device virtio-mem-pci,memdev=v0,requested-size=2G "
                 "-object memory-backend-ram,id=v1,size=1G "
                 "-device virtio-mem-pci,memdev=v1 "
                 "-object memory-backend-ram,id=v2,size=2G "
                 "-device {\"driver\":\"virtio-mem-pci\",\"memdev\":\"v2\","
                 "\"requested-size\":536870912}");
  g_assert_cmpuint(devmem(a, "v0")->mib, ==, 1024);
  g_assert_cmpuint(devmem(a, "v1")->mib, ==, 0);
  g_assert_cmpuint(devmem(a, "v2")->mib, ==, 512);
  /* Without vNUMA a device belongs to the whole guest. */
  g_assert_cmpint(devmem(a, "v0")->gnode, ==, -1);
}

static void
test_dimm_without_node(void)
{
  /* QEMU 7.2's pc-dimm and virtio-mem default to node 0. */
  g_autoptr(QpQemuArgs) a = parse_line(
      "-m 2G,slots=2,maxmem=4G -smp 2 "
      "-object memory-backend-ram,id=r0,size=1G "
      "-object memory-backend-ram,id=r1,size=1G "
      "-numa node,nodeid=0,cpus=0,memdev=r0 "
      "-numa node,nodeid=1,cpus=1,memdev=r1 "
      "-object memory-backend-ram,id=d0,size=256M -device pc-dimm,memdev=d0");
  g_assert_cmpint(devmem(a, "d0")->gnode, ==, 0);
  g_assert_null(devmem(a, "d0")->device);
}

static void
test_unused_backends(void)
{
  /* Claimed when they take memory at start (prealloc, reserved hugetlb
   * pages), else only bound; a character device (device DAX) is no RAM. */
  g_autoptr(QpQemuArgs) a = parse_line(
      "-m 1024 -smp 1 "
      "-object memory-backend-ram,id=plain,size=64M "
      "-object memory-backend-ram,id=pre,size=32M,prealloc=on "
      "-object memory-backend-memfd,id=huge,hugetlb=on,size=4M "
      "-object {\"qom-type\":\"memory-backend-memfd\",\"id\":\"noreserve\","
      "\"hugetlb\":true,\"hugetlbsize\":1073741824,\"size\":1073741824,"
      "\"reserve\":false} "
      "-object memory-backend-file,id=dax,size=16M,mem-path=/dev/zero");
  g_assert_cmpuint(a->req->n_devmem, ==, 4);
  const QpMemDevice *plain = devmem(a, "plain"), *pre = devmem(a, "pre");
  const QpMemDevice *huge = devmem(a, "huge"), *nr = devmem(a, "noreserve");
  g_assert_cmpint(plain->kind, ==, QP_MEM_UNUSED);
  g_assert_cmpuint(plain->mib, ==, 0);
  g_assert_cmpuint(pre->mib, ==, 32);
  g_assert_cmpuint(pre->page_kib, ==, 0);
  g_assert_cmpuint(huge->mib, ==, 4);
  g_assert_cmpuint(huge->page_kib, >, 0); /* the host's default size */
  g_assert_cmpuint(nr->mib, ==, 0);
  g_assert_cmpuint(nr->page_kib, ==, 1048576);
  g_assert_null(devmem(a, "dax"));
  /* The RAM stays ordinary memory. */
  g_assert_cmpuint(a->req->page_kib, ==, 0);
  g_assert_cmpuint(a->req->mem_mib, ==, 1024);

  /* A backend another device uses (memory shared through ivshmem) is that
   * device's: not the guest's memory to place. */
  g_autoptr(QpQemuArgs) shared =
      parse_line("-m 1024 -object memory-backend-file,id=hostmem,size=16M,"
                 "mem-path=/dev/shm/qp-ivshmem,share=on,prealloc=on "
                 "-device ivshmem-plain,memdev=hostmem");
  g_assert_cmpuint(shared->req->n_devmem, ==, 0);

  /* A file mapped read-only (readonly=on, either syntax) is the file's own
   * page cache, shared and never dirtied: no RAM of the guest's, on a
   * memory device or unused; writable, the same file is. */
  g_autoptr(QpQemuArgs) ro = parse_line(
      "-m 1024,slots=4,maxmem=4G -machine nvdimm=on "
      "-object memory-backend-file,id=img,size=16M,mem-path=/tmp/qp-ro.img,"
      "readonly=on -device nvdimm,id=nv0,memdev=img,unarmed=on "
      "-object {\"qom-type\":\"memory-backend-file\",\"id\":\"img2\","
      "\"size\":16777216,\"mem-path\":\"/tmp/qp-ro2.img\","
      "\"readonly\":true,\"prealloc\":true} "
      "-object memory-backend-file,id=rw,size=16M,mem-path=/tmp/qp-rw.img,"
      "readonly=off -device nvdimm,id=nv1,memdev=rw");
  g_assert_null(devmem(ro, "img"));
  g_assert_null(devmem(ro, "img2"));
  g_assert_cmpuint(devmem(ro, "rw")->mib, ==, 16);
  g_assert_cmpuint(ro->req->n_devmem, ==, 1);

  /* -mem-prealloc makes every backend preallocate. */
  g_autoptr(QpQemuArgs) b = parse_line(
      "-m 1024 -mem-prealloc -object memory-backend-ram,id=plain,size=64M");
  g_assert_cmpuint(devmem(b, "plain")->mib, ==, 64);
}

static void
test_busy_and_missing_memdev(void)
{
  /* QEMU refuses each of these ("can't use already busy memdev", "Device
   * 'nosuch' not found"): the first user counts, nothing is claimed
   * twice, and qemu-pin does not refuse. */
  g_autoptr(QpQemuArgs) a = parse_line(
      "-m 1G,slots=4,maxmem=4G "
      "-object memory-backend-ram,id=m0,size=1G -machine memory-backend=m0 "
      "-device pc-dimm,memdev=m0 "
      "-object memory-backend-ram,id=d0,size=128M "
      "-device pc-dimm,id=first,memdev=d0 -device pc-dimm,id=second,memdev=d0 "
      "-device pc-dimm,memdev=nosuch");
  g_assert_cmpuint(a->req->n_devmem, ==, 1);
  g_assert_cmpstr(a->req->devmem[0].device, ==, "first");
  g_assert_null(devmem(a, "m0"));
}

static void
test_file_size_from_file(void)
{
  g_autofree char *dir = g_dir_make_tmp("qp-mem-XXXXXX", NULL);
  g_autofree char *file = g_build_filename(dir, "ram", NULL);
  g_autofree char *data = g_malloc0(3 * MiB);
  g_assert_true(g_file_set_contents(file, data, 3 * MiB, NULL));
  g_autofree char *line = g_strdup_printf(
      "-m 1G,slots=1,maxmem=2G -object memory-backend-file,id=f,mem-path=%s,"
      "share=on -device pc-dimm,memdev=f",
      file);
  g_autoptr(QpQemuArgs) a = parse_line(line);
  g_assert_cmpuint(devmem(a, "f")->mib, ==, 3);
  g_unlink(file);
  g_rmdir(dir);
}

static void
test_page_size_per_guest_node(void)
{
  g_autoptr(QpQemuArgs) a = parse_line(
      "-m 3G -smp 3 "
      "-object memory-backend-ram,id=m0,size=1G "
      "-object memory-backend-memfd,id=m1,size=1G,hugetlb=on,hugetlbsize=1G "
      "-object {\"qom-type\":\"memory-backend-memfd\",\"id\":\"m2\","
      "\"size\":1073741824,\"hugetlb\":true,\"hugetlbsize\":2097152} "
      "-numa node,nodeid=0,cpus=0,memdev=m0 "
      "-numa node,nodeid=1,cpus=1,memdev=m1 "
      "-numa node,nodeid=2,cpus=2,memdev=m2");
  g_assert_cmpuint(a->req->gnodes[0].page_kib, ==, 0);
  g_assert_cmpuint(a->req->gnodes[1].page_kib, ==, 1048576);
  g_assert_cmpuint(a->req->gnodes[2].page_kib, ==, 2048);
  g_assert_cmpuint(a->req->n_devmem, ==, 0);

  /* Without vNUMA: the machine's backend gives the page size and the
   * caller's binding. */
  g_autoptr(QpQemuArgs) b = parse_line(
      "-m 2G -object memory-backend-memfd,id=m,size=2G,hugetlb=on,"
      "hugetlbsize=2M,host-nodes=1,policy=bind -machine memory-backend=m");
  g_assert_cmpuint(b->req->page_kib, ==, 2048);
  g_autofree char *bn = list(b->req->host_nodes);
  g_assert_cmpstr(bn, ==, "1");
  g_assert_cmpint(b->req->policy, ==, QP_POLICY_BIND);
}

/* -mem-path and memory-backend-file on hugetlbfs take its page size. The
 * test mounts hugetlbfs (2 MiB and 1 GiB pages) in a mount namespace of its
 * own, so it needs root. */
static void
test_hugetlbfs_paths(void)
{
  if (geteuid() != 0 || unshare(CLONE_NEWNS) != 0 ||
      mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
    g_test_skip("mounting hugetlbfs in a mount namespace needs root");
    return;
  }
  g_autofree char *dir = g_dir_make_tmp("qp-hugetlbfs-XXXXXX", NULL);
  g_autofree char *m2 = g_build_filename(dir, "2M", NULL);
  g_autofree char *m1g = g_build_filename(dir, "1G", NULL);
  g_mkdir(m2, 0700);
  g_mkdir(m1g, 0700);
  if (mount("none", m2, "hugetlbfs", 0, "pagesize=2M") != 0) {
    g_test_skip("cannot mount hugetlbfs with 2 MiB pages");
    return;
  }
  gboolean have_1g = mount("none", m1g, "hugetlbfs", 0, "pagesize=1G") == 0;

  g_autofree char *line = g_strdup_printf("-m 512 -mem-path %s", m2);
  g_autoptr(QpQemuArgs) a = parse_line(line);
  g_assert_cmpuint(a->req->page_kib, ==, 2048);

  /* With legacy -numa node,mem= every node's RAM is in -mem-path. */
  g_autofree char *legacy = g_strdup_printf(
      "-M pc-i440fx-5.0 -m 512 -smp 2 -mem-path %s -numa node,mem=256M "
      "-numa node,mem=256M",
      m2);
  g_autoptr(QpQemuArgs) l = parse_line(legacy);
  g_assert_cmpuint(l->req->gnodes[0].page_kib, ==, 2048);
  g_assert_cmpuint(l->req->gnodes[1].page_kib, ==, 2048);

  if (have_1g) {
    /* A file QEMU is to create there: its directory says. */
    g_autofree char *file = g_strdup_printf(
        "-m 1G,slots=1,maxmem=4G -object memory-backend-file,id=f,size=1G,"
        "mem-path=%s/guest,share=on -device pc-dimm,memdev=f",
        m1g);
    g_autoptr(QpQemuArgs) b = parse_line(file);
    g_assert_cmpuint(b->req->devmem[0].page_kib, ==, 1048576);
    g_assert_cmpuint(b->req->devmem[0].mib, ==, 1024);
    g_assert_cmpuint(b->req->page_kib, ==, 0);
    umount(m1g);
  }
  umount(m2);
  g_rmdir(m2);
  g_rmdir(m1g);
  g_rmdir(dir);
}

/* ---- plans ----------------------------------------------------------------
 */

/* One unused 2 MiB hugetlb backend must not make the whole guest
 * "hugepages". The RAM is ordinary memory; the backend's reserved
 * page is claimed on the same node. */
static void
test_plan_unused_hugetlb_backend(void)
{
  g_autoptr(QpHost) h = qp_test_recorded("intel-2s-smt.xml");
  g_autoptr(QpQemuArgs) a = parse_line(
      "-m 1024 -smp 1 -object memory-backend-memfd,id=x,hugetlb=on,size=2M");
  /* The recorded host has 2 MiB and 1 GiB pools; the host running the
   * test gives the default size: make it the recorded one. */
  if (a->req->devmem[0].page_kib != 2048) {
    g_test_message("default hugepage size here is %" G_GUINT64_FORMAT " KiB",
                   a->req->devmem[0].page_kib);
    a->req->devmem[0].page_kib = 2048;
  }
  for (QpMode m = QP_MODE_BALANCED; m <= QP_MODE_ONE_TO_ONE; m++) {
    g_autoptr(QpPlan) p = qp_test_plan_ok(h, NULL, a->req, m);
    int node = qp_test_mem_on(p, 0) > 0 ? 0 : 1;
    g_assert_cmpuint(qp_test_mem_on(p, node), ==, 1024);
    g_assert_cmpuint(qp_test_pages_on(p, node, 2048), ==, 1);
    g_assert_cmpuint(qp_test_pages_on(p, 1 - node, 2048), ==, 0);
    g_assert_cmpuint(p->claim_huge->len, ==, 1);
    const QpPlanMem *x = plan_mem(p, "x");
    g_assert_nonnull(x);
    g_assert_cmpint(x->kind, ==, QP_MEM_UNUSED);
    g_assert_cmpuint(x->page_kib, ==, 2048);
  }

  /* A host without 2 MiB pages: the reserved page does not fit, as QEMU
   * cannot map it either ("unable to map backing store"). */
  g_autoptr(QpHost) none = qp_test_recorded("this-machine.xml");
  g_autoptr(GError) error = qp_test_plan_nofit(none, a->req, QP_MODE_AUTO);
  g_assert_nonnull(strstr(error->message, "2 MiB of 2048 KiB hugepages"));
  g_assert_null(strstr(error->message, "1024 MiB of"));
}

/* Guest node 0 on ordinary memory, guest node 1
 * on 1 GiB pages: ordinary memory on node 0's host node only, 1 GiB pages on
 * node 1's host node only. */
static void
test_plan_ordinary_and_1g_nodes(void)
{
  g_autoptr(QpHost) h = qp_test_recorded("intel-2s-smt.xml");
  g_autoptr(QpQemuArgs) a = parse_line(
      "-m 6G -smp 2 "
      "-object memory-backend-ram,id=m0,size=2G "
      "-object memory-backend-memfd,id=m1,size=4G,hugetlb=on,hugetlbsize=1G "
      "-numa node,nodeid=0,cpus=0,memdev=m0 "
      "-numa node,nodeid=1,cpus=1,memdev=m1");
  for (QpMode m = QP_MODE_NUMA; m <= QP_MODE_ONE_TO_ONE; m++) {
    g_autoptr(QpPlan) p = qp_test_plan_ok(h, NULL, a->req, m);
    const QpPlanMem *m0 = plan_mem(p, "m0"), *m1 = plan_mem(p, "m1");
    int n0 = hwloc_bitmap_first(m0->host_nodes);
    int n1 = hwloc_bitmap_first(m1->host_nodes);
    g_assert_cmpint(n0, !=, n1);
    g_assert_cmpuint(qp_test_mem_on(p, n0), ==, 2048);
    g_assert_cmpuint(qp_test_mem_on(p, n1), ==, 0);
    g_assert_cmpuint(qp_test_pages_on(p, n1, 1048576), ==, 4);
    g_assert_cmpuint(qp_test_pages_on(p, n0, 1048576), ==, 0);
    g_assert_cmpuint(p->claim_mem->len, ==, 1);
    g_assert_cmpuint(p->claim_huge->len, ==, 1);
  }
  /* A fifth 1 GiB page: the pool (4 per node) is the limit, named. */
  g_autoptr(QpQemuArgs) b = parse_line(
      "-m 7G -smp 2 "
      "-object memory-backend-ram,id=m0,size=2G "
      "-object memory-backend-memfd,id=m1,size=5G,hugetlb=on,hugetlbsize=1G "
      "-numa node,nodeid=0,cpus=0,memdev=m0 "
      "-numa node,nodeid=1,cpus=1,memdev=m1");
  g_autoptr(GError) error = qp_test_plan_nofit(h, b->req, QP_MODE_NUMA);
  g_assert_nonnull(strstr(error->message,
                          "guest node 1 needs 5120 MiB of 1048576 KiB "
                          "hugepages (5 pages)"));
}

/* Memory devices are claimed with their guest node, and count when the
 * planner looks for room. */
static void
test_plan_devices(void)
{
  g_autoptr(QpHost) h = qp_test_recorded("2s-8node.xml"); /* 32 GiB per node */
  g_autoptr(QpQemuArgs) a = parse_line(
      "-m 8G,slots=4,maxmem=64G -smp 2 "
      "-object memory-backend-ram,id=r0,size=4G "
      "-object memory-backend-ram,id=r1,size=4G "
      "-numa node,nodeid=0,cpus=0,memdev=r0 "
      "-numa node,nodeid=1,cpus=1,memdev=r1 "
      "-object memory-backend-ram,id=d0,size=20G "
      "-device pc-dimm,id=dimm0,memdev=d0,node=1 "
      "-object memory-backend-ram,id=v0,size=16G "
      "-device virtio-mem-pci,id=vm0,memdev=v0,requested-size=2G "
      "-object memory-backend-ram,id=c0,size=1G,host-nodes=7,policy=bind "
      "-device pc-dimm,memdev=c0,node=1");
  g_autoptr(QpPlan) p = qp_test_plan_ok(h, NULL, a->req, QP_MODE_NUMA);
  const QpPlanMem *r0 = plan_mem(p, "r0"), *r1 = plan_mem(p, "r1");
  const QpPlanMem *d0 = plan_mem(p, "d0"), *v0 = plan_mem(p, "v0");
  const QpPlanMem *c0 = plan_mem(p, "c0");
  g_assert_true(hwloc_bitmap_isequal(d0->host_nodes, r1->host_nodes));
  g_assert_true(hwloc_bitmap_isequal(v0->host_nodes, r0->host_nodes));
  g_assert_cmpint(d0->kind, ==, QP_MEM_DIMM);
  g_assert_cmpstr(d0->device, ==, "dimm0");
  g_assert_cmpuint(v0->mem_mib, ==, 2048);
  g_assert_true(c0->caller_set);
  g_autofree char *cn = list(c0->host_nodes);
  g_assert_cmpstr(cn, ==, "7");
  int n0 = hwloc_bitmap_first(r0->host_nodes);
  int n1 = hwloc_bitmap_first(r1->host_nodes);
  g_assert_cmpuint(qp_test_mem_on(p, n0), ==, 4096 + 2048);
  g_assert_cmpuint(qp_test_mem_on(p, n1), ==, 4096 + 20480);
  g_assert_cmpuint(qp_test_mem_on(p, 7), ==, 1024);
  /* The plan's rewrite binds the device backends there. */
  g_auto(GStrv) argv = qp_qemu_args_rewrite(a, "qemu", p, -1, NULL);
  g_assert_nonnull(argv);
  g_autofree char *joined = g_strjoinv(" ", argv);
  g_autofree char *d0b =
      g_strdup_printf("id=d0,size=20G,host-nodes=%d,policy=bind", n1);
  g_assert_nonnull(strstr(joined, d0b));
  g_assert_nonnull(strstr(joined, "id=c0,size=1G,host-nodes=7,policy=bind "));

  /* 4 GiB of RAM and a 30 GiB dimm on a 32 GiB node: no node holds guest
   * node 1, so the dimm makes the difference. */
  g_autoptr(QpQemuArgs) b =
      parse_line("-m 8G,slots=4,maxmem=64G -smp 2 "
                 "-object memory-backend-ram,id=r0,size=4G "
                 "-object memory-backend-ram,id=r1,size=4G "
                 "-numa node,nodeid=0,cpus=0,memdev=r0 "
                 "-numa node,nodeid=1,cpus=1,memdev=r1 "
                 "-object memory-backend-ram,id=d0,size=30G "
                 "-device pc-dimm,memdev=d0,node=1");
  g_autoptr(GError) error = qp_test_plan_nofit(h, b->req, QP_MODE_NUMA);
  g_assert_nonnull(strstr(error->message, "guest node 1 needs 34816 MiB"));

  /* Balanced: the set must hold the RAM and the dimm together. */
  g_autoptr(QpQemuArgs) c = parse_line(
      "-m 16G,slots=4,maxmem=64G -smp 2 "
      "-object memory-backend-ram,id=d0,size=24G -device pc-dimm,memdev=d0");
  g_autoptr(QpPlan) pb = qp_test_plan_ok(h, NULL, c->req, QP_MODE_BALANCED);
  g_assert_cmpint(hwloc_bitmap_weight(pb->host_nodes), ==, 2);
  guint64 total = 0;
  for (guint i = 0; i < pb->claim_mem->len; i++)
    total += g_array_index(pb->claim_mem, QpNodeAmount, i).mib;
  g_assert_cmpuint(total, ==, 16384 + 24576);
}

/* What QEMU 7.2 refuses at start passes qemu-pin's parser and planner (a
 * conservative plan); QEMU then says what is wrong. */
static void
test_qemu_refuses_itself(void)
{
  /* The MiB each plan claims: the RAM plus what each device would map. */
  static const guint64 claimed[] = {1280, 1024, 3072, 1280, 1024, 1280};
  static const char *const lines[] = {
      /* "no slots where allocated, please specify the 'slots' option" */
      "-m 1024 -object memory-backend-ram,id=m1,size=256M "
      "-device pc-dimm,memdev=m1",
      /* "Device 'nosuch' not found" */
      "-m 1024,slots=2,maxmem=2G -device pc-dimm,memdev=nosuch",
      /* "not enough space, currently 0x0 in use of total space for memory
       * devices 0x40000000" */
      "-m 1024,slots=2,maxmem=2G -object memory-backend-ram,id=m1,size=2G "
      "-device pc-dimm,memdev=m1",
      /* "'DIMM property node has value 1' which exceeds the number of numa
       * nodes: 1" */
      "-m 1024,slots=2,maxmem=2G -object memory-backend-ram,id=m1,size=256M "
      "-device pc-dimm,memdev=m1,node=1",
      /* "can't use already busy memdev: m0" */
      "-m 1024,slots=2,maxmem=2G -object memory-backend-ram,id=m0,size=1G "
      "-machine memory-backend=m0 -device pc-dimm,memdev=m0",
      /* a node that is not a number */
      "-m 1024,slots=2,maxmem=2G -object memory-backend-ram,id=m1,size=256M "
      "-device pc-dimm,memdev=m1,node=x",
  };
  g_autoptr(QpHost) h = qp_test_recorded("2s-8node.xml");
  for (guint i = 0; i < G_N_ELEMENTS(lines); i++) {
    g_autoptr(QpQemuArgs) a = parse_line(lines[i]);
    for (QpMode m = QP_MODE_BALANCED; m <= QP_MODE_ONE_TO_ONE; m++) {
      g_autoptr(QpPlan) p = qp_test_plan_ok(h, NULL, a->req, m);
      guint64 total = 0;
      for (guint k = 0; k < p->claim_mem->len; k++)
        total += g_array_index(p->claim_mem, QpNodeAmount, k).mib;
      g_assert_cmpuint(total, ==, claimed[i]);
    }
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/memory/parse/devices-both-syntaxes",
                  test_devices_both_syntaxes);
  g_test_add_func("/memory/parse/virtio-mem-requested-size",
                  test_virtio_mem_requested_size);
  g_test_add_func("/memory/parse/device-without-node-is-node-0",
                  test_dimm_without_node);
  g_test_add_func("/memory/parse/unused-backends", test_unused_backends);
  g_test_add_func("/memory/parse/busy-and-missing-memdev",
                  test_busy_and_missing_memdev);
  g_test_add_func("/memory/parse/file-size-from-file",
                  test_file_size_from_file);
  g_test_add_func("/memory/parse/page-size-per-guest-node",
                  test_page_size_per_guest_node);
  g_test_add_func("/memory/parse/mem-path-and-files-on-hugetlbfs",
                  test_hugetlbfs_paths);
  g_test_add_func("/memory/plan/unused-hugetlb-backend-keeps-ram-ordinary",
                  test_plan_unused_hugetlb_backend);
  g_test_add_func("/memory/plan/ordinary-node-and-1g-node",
                  test_plan_ordinary_and_1g_nodes);
  g_test_add_func("/memory/plan/devices-with-their-guest-node",
                  test_plan_devices);
  g_test_add_func("/memory/plan/qemu-refuses-itself", test_qemu_refuses_itself);
  return g_test_run();
}
