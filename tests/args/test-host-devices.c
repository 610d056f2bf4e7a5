/* The PCI device behind storage and network (launcher/qemu/host-devices.c)
 * in a fake sysfs tree built in a temporary directory, laid out as the
 * kernel lays it out: the devices under devices/, the views
 * (dev/block/MAJ:MIN, class/net/IF, bus/pci/devices/BDF) links into it.
 * One check reads this machine's own sysfs. */
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "launcher/qemu/host-devices.h"
#include "tests/common/qp-test.h"

#define NVME_PCI "0000:3b:00.0"
#define SATA_PCI "0000:00:1f.2"
#define NIC_PCI "0000:af:00.0"
#define NIC2_PCI "0000:af:00.1"

static char *sys;

static void
make_dir(const char *rel)
{
  g_autofree char *path = g_build_filename(sys, rel, NULL);
  g_assert_cmpint(g_mkdir_with_parents(path, 0755), ==, 0);
}

static void
make_file(const char *rel, const char *text)
{
  g_autofree char *path = g_build_filename(sys, rel, NULL);
  g_autofree char *dir = g_path_get_dirname(path);
  g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
  g_assert_true(g_file_set_contents(path, text, -1, NULL));
}

/* A link at REL to the absolute TARGET_REL (both under the root). */
static void
make_link(const char *target_rel, const char *rel)
{
  g_autofree char *path = g_build_filename(sys, rel, NULL);
  g_autofree char *target = g_build_filename(sys, target_rel, NULL);
  g_autofree char *dir = g_path_get_dirname(path);
  g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
  g_assert_cmpint(symlink(target, path), ==, 0);
}

#define NVME "devices/pci0000:3a/0000:3a:00.0/" NVME_PCI "/nvme/nvme0/nvme0n1"
#define SDA                                                                    \
  "devices/pci0000:00/" SATA_PCI "/ata1/host0/target0:0:0/0:0:0:0/block/sda"
#define NIC "devices/pci0000:ae/0000:ae:00.0/" NIC_PCI
#define NIC2 "devices/pci0000:ae/0000:ae:00.0/" NIC2_PCI

static void
build_tree(void)
{
  /* Block: an NVMe namespace and its partition, a SATA disk, dm on the
   * partition, md over both disks, a loop device with no backing file. */
  make_file(NVME "/nvme0n1p2/partition", "2\n");
  make_link(NVME "/nvme0n1p2", "dev/block/259:2");
  make_link(NVME, "dev/block/259:0");
  make_dir(SDA);
  make_link(SDA, "dev/block/8:0");
  make_dir("devices/virtual/block/dm-0");
  make_link(NVME "/nvme0n1p2", "devices/virtual/block/dm-0/slaves/nvme0n1p2");
  make_link("devices/virtual/block/dm-0", "dev/block/253:0");
  make_link(NVME, "devices/virtual/block/md0/slaves/nvme0n1");
  make_link(SDA, "devices/virtual/block/md0/slaves/sda");
  make_link("devices/virtual/block/md0", "dev/block/9:0");
  make_dir("devices/virtual/block/loop0");
  make_link("devices/virtual/block/loop0", "dev/block/7:0");
  /* An NVMe multipath head over one controller's path. */
  make_link(NVME, "devices/virtual/nvme-subsystem/nvme-subsys0/nvme1n1/"
                  "multipath/nvme0c0n1");
  make_link("devices/virtual/nvme-subsystem/nvme-subsys0/nvme1n1",
            "dev/block/259:5");
  /* Network: two ports, a macvtap on one, a bridge with one physical port
   * and a tap, a bridge with two physical ports, a lone tap. */
  make_dir(NIC "/net/enp175s0f0");
  make_link(NIC, NIC "/net/enp175s0f0/device");
  make_link(NIC "/net/enp175s0f0", "class/net/enp175s0f0");
  make_dir(NIC2 "/net/enp175s0f1");
  make_link(NIC2, NIC2 "/net/enp175s0f1/device");
  make_link(NIC2 "/net/enp175s0f1", "class/net/enp175s0f1");
  make_link("class/net/enp175s0f0",
            "devices/virtual/net/macvtap0/lower_enp175s0f0");
  make_link("devices/virtual/net/macvtap0", "class/net/macvtap0");
  const char *br0[] = {"tap0", "enp175s0f0", "tap1"};
  for (guint i = 0; i < G_N_ELEMENTS(br0); i++) {
    g_autofree char *at =
        g_strdup_printf("devices/virtual/net/br0/brif/%s", br0[i]);
    make_dir(at);
  }
  make_link("devices/virtual/net/br0", "class/net/br0");
  make_link("devices/virtual/net/br0", "devices/virtual/net/tap0/master");
  make_link("devices/virtual/net/tap0", "class/net/tap0");
  make_dir("devices/virtual/net/tap1");
  make_link("devices/virtual/net/tap1", "class/net/tap1");
  make_dir("devices/virtual/net/br1/brif/enp175s0f0");
  make_dir("devices/virtual/net/br1/brif/enp175s0f1");
  make_dir("devices/virtual/net/br1/brif/tap2");
  make_link("devices/virtual/net/br1", "class/net/br1");
  make_link("devices/virtual/net/br1", "devices/virtual/net/tap2/master");
  make_link("devices/virtual/net/tap2", "class/net/tap2");
  make_dir("devices/virtual/net/tap3");
  make_link("devices/virtual/net/tap3", "class/net/tap3");
  make_file(NIC "/numa_node", "1\n");
  make_link(NIC, "bus/pci/devices/" NIC_PCI);
  make_file("devices/pci0000:3a/0000:3a:00.0/" NVME_PCI "/numa_node", "-1\n");
  make_link("devices/pci0000:3a/0000:3a:00.0/" NVME_PCI,
            "bus/pci/devices/" NVME_PCI);
}

static void
check_block(guint maj, guint min, const char *want, const char *why_part)
{
  const char *why = NULL;
  g_autofree char *got = qp_sysfs_block_pci(sys, maj, min, &why);
  g_assert_cmpstr(got, ==, want);
  if (want == NULL) {
    g_assert_nonnull(why);
    g_assert_nonnull(strstr(why, why_part));
  }
}

static void
test_block(void)
{
  check_block(259, 0, NVME_PCI, NULL); /* namespace: its controller */
  check_block(259, 2, NVME_PCI, NULL); /* partition: its disk */
  check_block(8, 0, SATA_PCI, NULL);   /* SCSI disk: its HBA */
  check_block(253, 0, NVME_PCI, NULL); /* dm: its slave */
  check_block(259, 5, NVME_PCI, NULL); /* multipath head: its path */
  check_block(9, 0, NULL, "different PCI devices"); /* md over two */
  check_block(7, 0, NULL, "virtual block device");
  check_block(1, 99, NULL, "not in sysfs");
}

static void
check_net(const char *ifname, const char *want, const char *why_part)
{
  const char *why = NULL;
  g_autofree char *got = qp_sysfs_netdev_pci(sys, ifname, &why);
  g_assert_cmpstr(got, ==, want);
  if (want == NULL) {
    g_assert_nonnull(why);
    g_assert_nonnull(strstr(why, why_part));
  }
}

static void
test_net(void)
{
  check_net("enp175s0f0", NIC_PCI, NULL);
  check_net("macvtap0", NIC_PCI, NULL);
  check_net("tap0", NIC_PCI, NULL); /* br0's one physical port */
  check_net("tap2", NULL, "more than one physical port");
  check_net("tap3", NULL, "no physical port");
  check_net("nosuch0", NULL, "not an interface");
}

static void
test_node(void)
{
  g_assert_cmpint(qp_sysfs_pci_node(sys, NIC_PCI), ==, 1);
  g_assert_cmpint(qp_sysfs_pci_node(sys, NVME_PCI), ==, -1);
  g_assert_cmpint(qp_sysfs_pci_node(sys, "0000:00:00.7"), ==, -1);
}

/* This machine: the file system of the source tree, when it is on a PCI
 * block device, resolves to that device and its numa_node. */
static void
test_this_machine(void)
{
  const char *src = g_getenv("QP_SOURCE_ROOT");
  struct stat st;
  g_assert_nonnull(src);
  g_assert_cmpint(stat(src, &st), ==, 0);
  g_autofree char *link = g_strdup_printf("/sys/dev/block/%u:%u",
                                          major(st.st_dev), minor(st.st_dev));
  g_autofree char *real = realpath(link, NULL);
  if (real == NULL || strstr(real, "/pci") == NULL) {
    g_test_skip("the source tree is not on a PCI block device here");
    return;
  }
  const char *why = NULL;
  g_autofree char *bdf = qp_sysfs_path_pci("/sys", src, &why);
  g_assert_nonnull(bdf);
  g_assert_nonnull(strstr(real, bdf));
  g_autofree char *node_path =
      g_strdup_printf("/sys/bus/pci/devices/%s/numa_node", bdf);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(node_path, &text, NULL, NULL));
  g_assert_cmpint(qp_sysfs_pci_node("/sys", bdf), ==,
                  atoi(text) < 0 ? -1 : atoi(text));
  g_test_message("%s is on %s, node %d", src, bdf,
                 qp_sysfs_pci_node("/sys", bdf));
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_autofree char *dir = qp_test_tmpdir();
  sys = g_build_filename(dir, "sys", NULL);
  build_tree();
  g_test_add_func("/host-devices/block", test_block);
  g_test_add_func("/host-devices/net", test_net);
  g_test_add_func("/host-devices/node", test_node);
  g_test_add_func("/host-devices/this-machine", test_this_machine);
  int r = g_test_run();
  g_free(sys);
  qp_test_rmtree(dir);
  return r;
}
