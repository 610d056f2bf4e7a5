/* Storage and network devices in the plan, on recorded hosts whose hwloc
 * XML holds PCI devices with block and network OS devices under them
 * (tests/plan/test-recorded-hosts.c lists them): the VM prefers its
 * devices' node, an iothread runs on the node of the devices it serves,
 * and --device-locality=ignore turns both off. */
#include <string.h>

#include "tests/common/qp-plan-test.h"
#include "topology/ledger/ledger.h"
#include "topology/plan/claim.h"
#include "tests/common/qp-test.h"

/* x3950m2-io.xml: sda on 0000:04:00.0 (node 0), sdb on 0000:64:00.0
 * (node 2); dcs8000z-io.xml: ib0 on 0000:82:00.0 (node 1). */
#define SDA "0000:04:00.0"
#define SDB "0000:64:00.0"
#define IB0 "0000:82:00.0"

static void
add_io(QpRequest *r, const char *what, const char *bdf, const char *iothread)
{
  QpIoDevice *d = g_new0(QpIoDevice, 1);
  d->what = g_strdup(what);
  d->bdf = g_strdup(bdf);
  d->iothread = g_strdup(iothread);
  g_ptr_array_add(r->io, d);
}

static QpRequest *
request(guint vcpus, guint64 mib)
{
  QpRequest *r = qp_request_new();
  r->vcpus = r->maxcpus = r->cores = vcpus;
  r->mem_mib = mib;
  r->n_iothreads = 1;
  return r;
}

static QpPlan *
plan_with(const QpHost *h, const QpRequest *r, QpMode mode,
          QpDeviceLocality locality)
{
  QpPlacementOptions o;
  qp_placement_options_init(&o);
  o.mode = mode;
  o.device_locality = locality;
  g_autoptr(GError) error = NULL;
  QpPlan *p = qp_plan_compute(h, NULL, r, &o, &error);
  g_assert_no_error(error);
  g_assert_nonnull(p);
  return p;
}

static hwloc_const_bitmap_t
node_cpus(const QpHost *h, int id)
{
  return h->nodes[qp_host_node_index(h, id)].cpus;
}

static void
assert_list(hwloc_const_bitmap_t set, const char *want)
{
  g_autofree char *l = qp_list_format(set);
  g_assert_cmpstr(l, ==, want);
}

/* Balanced: the fewest nodes, and among equals the disk's node; its
 * iothread there too. */
static void
test_balanced(void)
{
  g_autoptr(QpHost) h = qp_test_recorded("x3950m2-io.xml");
  g_autoptr(QpRequest) r = request(4, 4096);
  add_io(r, "virtio-blk-pci disk0 (/dev/sdb)", SDB, "io0");
  g_autoptr(QpPlan) p = plan_with(h, r, QP_MODE_BALANCED, QP_DEVLOC_PREFERRED);
  assert_list(p->host_nodes, "2");
  g_assert_cmpuint(p->devices->len, ==, 1);
  g_assert_cmpint(((QpPlanDevice *)p->devices->pdata[0])->node, ==, 2);
  const QpPlanIothread *t = qp_plan_iothread(p, "io0");
  g_assert_nonnull(t);
  g_assert_cmpint(t->node, ==, 2);
  g_assert_true(hwloc_bitmap_isincluded(t->cpus, node_cpus(h, 2)));
  g_assert_true(hwloc_bitmap_isincluded(t->cpus, p->process_cpus));

  /* ignore: the first node fits, and the iothread stays with the VM. */
  g_autoptr(QpPlan) q = plan_with(h, r, QP_MODE_BALANCED, QP_DEVLOC_IGNORE);
  assert_list(q->host_nodes, "0");
  g_assert_null(qp_plan_iothread(q, "io0"));
  g_assert_cmpint(((QpPlanDevice *)q->devices->pdata[0])->node, ==, 2);
}

/* numa: the VM may sit elsewhere (the disk's node is full), the iothread
 * still goes to the disk's node. */
static void
test_numa_iothread_on_disk_node(void)
{
  g_autoptr(QpHost) h = qp_test_recorded("x3950m2-io.xml");
  g_autoptr(QpRequest) r = request(2, 1024);
  add_io(r, "virtio-blk-pci disk0 (/dev/sda)", SDA, NULL);
  add_io(r, "virtio-blk-pci disk1 (/dev/sdb)", SDB, "io1");
  g_autoptr(QpPlan) p = plan_with(h, r, QP_MODE_NUMA, QP_DEVLOC_PREFERRED);
  assert_list(p->host_nodes, "0");
  const QpPlanIothread *t = qp_plan_iothread(p, "io1");
  g_assert_nonnull(t);
  g_assert_cmpint(t->node, ==, 2);
  g_assert_true(hwloc_bitmap_isequal(t->cpus, node_cpus(h, 2)));
  /* The emulator stays with the VM. */
  g_assert_true(hwloc_bitmap_isincluded(p->emulator_cpus, node_cpus(h, 0)));
}

/* An iothread serving disks on two nodes stays with the VM. */
static void
test_iothread_split(void)
{
  g_autoptr(QpHost) h = qp_test_recorded("x3950m2-io.xml");
  g_autoptr(QpRequest) r = request(2, 1024);
  add_io(r, "virtio-blk-pci disk0 (/dev/sda)", SDA, "io0");
  add_io(r, "virtio-blk-pci disk1 (/dev/sdb)", SDB, "io0");
  g_autoptr(QpPlan) p = plan_with(h, r, QP_MODE_BALANCED, QP_DEVLOC_PREFERRED);
  g_assert_null(qp_plan_iothread(p, "io0"));
  gboolean said = FALSE;
  for (guint i = 0; i < p->reasons->len; i++)
    said |= strstr(p->reasons->pdata[i], "several host nodes") != NULL;
  g_assert_true(said);
}

/* A network device (ib0 on node 1) draws the VM too; a device of unknown
 * host side neither warns nor fails under required. */
static void
test_network_and_unknown(void)
{
  g_autoptr(QpHost) h = qp_test_recorded("dcs8000z-io.xml");
  g_autoptr(QpRequest) r = request(2, 1024);
  add_io(r, "virtio-net-pci net0 (ib0)", IB0, NULL);
  add_io(r, "virtio-blk-pci disk0 (/tmp/disk.img)", NULL, "io0");
  g_autoptr(QpPlan) p = plan_with(h, r, QP_MODE_BALANCED, QP_DEVLOC_REQUIRED);
  assert_list(p->host_nodes, "1");
  g_assert_cmpuint(p->warnings->len, ==, 0);
  g_assert_cmpint(((QpPlanDevice *)p->devices->pdata[1])->node, ==, -1);
  g_assert_null(qp_plan_iothread(p, "io0"));
}

/* The ledger record carries the devices in words, for `status`. */
static void
test_record(void)
{
  g_autoptr(QpHost) h = qp_test_recorded("x3950m2-io.xml");
  g_autoptr(QpRequest) r = request(4, 4096);
  add_io(r, "virtio-blk-pci disk0 (/dev/sdb)", SDB, "io0");
  g_autoptr(QpPlan) p = plan_with(h, r, QP_MODE_BALANCED, QP_DEVLOC_PREFERRED);
  g_autoptr(QpClaim) c = qp_claim_from_plan(p, "vm1", "vm1");
  g_autofree char *text = qp_claim_to_json(c);
  g_autoptr(GError) error = NULL;
  g_autoptr(QpClaim) back = qp_claim_from_json(text, strlen(text), &error);
  g_assert_no_error(error);
  g_assert_cmpuint(back->devices->len, ==, 1);
  g_autofree char *cpus = qp_list_format(qp_plan_iothread(p, "io0")->cpus);
  g_autofree char *want = g_strdup_printf(
      "virtio-blk-pci disk0 (/dev/sdb): PCI " SDB ", host node 2, iothread "
      "io0 on CPUs %s",
      cpus);
  g_assert_cmpstr(back->devices->pdata[0], ==, want);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/io-locality/balanced", test_balanced);
  g_test_add_func("/io-locality/numa-iothread",
                  test_numa_iothread_on_disk_node);
  g_test_add_func("/io-locality/iothread-split", test_iothread_split);
  g_test_add_func("/io-locality/network-and-unknown", test_network_and_unknown);
  g_test_add_func("/io-locality/record", test_record);
  return g_test_run();
}
