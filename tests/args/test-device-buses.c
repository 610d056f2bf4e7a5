/* The guest side of device locality (launcher/qemu/device-buses.c): the
 * argv qemu-pin execs puts a disk whose host node is known on a NUMA-aware
 * expander bus of the guest node on that host node, and real QEMU 7.2
 * accepts every line of it. The disk is a file in a temporary directory of
 * this machine, so its host node is the live host's answer for that file
 * system's PCI device; a machine where that directory is on no PCI block
 * device skips. */
#include <string.h>
#include <unistd.h>

#include "launcher/qemu/args.h"
#include "launcher/qemu/device-buses.h"
#include "launcher/qemu/host-devices.h"
#include "launcher/qemu/rewrite.h"
#include "tests/common/qp-test.h"

typedef struct {
  char *dir, *disk;
} Fixture;

static void
setup(Fixture *f, gconstpointer data)
{
  f->dir = qp_test_tmpdir();
  f->disk = g_build_filename(f->dir, "disk.img", NULL);
  g_assert_true(g_file_set_contents(f->disk, "", 0, NULL));
  g_assert_cmpint(truncate(f->disk, 1 << 20), ==, 0);
}

static void
teardown(Fixture *f, gconstpointer data)
{
  qp_test_rmtree(f->dir);
  g_free(f->dir);
  g_free(f->disk);
}

/* The argv qemu-pin would exec for EXTRA in MODE (two guest nodes) on the
 * live host; *WARNING (when not NULL) the crossing warning. */
/* ARGC arguments of ARGV parsed (into *ARGS) and planned in MODE, with
 * --vnuma=auto when VNUMA, on the recorded host XML of QP_TOPOLOGIES (NULL:
 * this host) with no other claim. */
static QpPlan *
plan_args(guint argc, char **argv, const char *xml, QpMode mode, gboolean vnuma,
          QpQemuArgs **args)
{
  g_autoptr(GError) error = NULL;
  *args = qp_qemu_args_parse(argc, argv, &error);
  g_assert_no_error(error);
  g_autofree char *path =
      xml ? g_build_filename(g_getenv("QP_TOPOLOGIES"), xml, NULL) : NULL;
  g_autoptr(QpHost) host = qp_host_load(path, &error);
  g_assert_no_error(error);
  QpPlacementOptions o;
  qp_placement_options_init(&o);
  o.mode = mode;
  o.vnuma = vnuma;
  g_autoptr(QpClaims) claims = qp_claims_new();
  QpPlan *plan = qp_plan_compute(host, claims, (*args)->req, &o, &error);
  g_assert_no_error(error);
  return plan;
}

static char **
rewritten_warn(const Fixture *f, const char *machine, QpMode mode,
               const char *const *extra, char **warning)
{
  g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func(g_free);
  g_autofree char *drive =
      g_strdup_printf("file=%s,if=none,id=d0,format=raw", f->disk);
  const char *base[] = {"-machine", machine,
                        "-m",       "256",
                        "-smp",     "2",
                        "-object",  "memory-backend-ram,id=m0,size=128M",
                        "-object",  "memory-backend-ram,id=m1,size=128M",
                        "-numa",    "node,nodeid=0,cpus=0,memdev=m0",
                        "-numa",    "node,nodeid=1,cpus=1,memdev=m1",
                        "-object",  "iothread,id=io0",
                        "-drive",   drive};
  for (guint i = 0; i < G_N_ELEMENTS(base); i++)
    g_ptr_array_add(argv, g_strdup(base[i]));
  for (guint i = 0; extra[i] != NULL; i++)
    g_ptr_array_add(argv, g_strdup(extra[i]));
  g_autoptr(GError) error = NULL;
  g_autoptr(QpQemuArgs) a = NULL;
  g_autoptr(QpPlan) plan =
      plan_args(argv->len, (char **)argv->pdata, NULL, mode, FALSE, &a);
  char **out = qp_qemu_args_rewrite(a, "qemu", plan, -1, &error);
  g_assert_no_error(error);
  if (warning != NULL)
    *warning = qp_device_buses_warning(a, plan);
  return out;
}

static char **
rewritten(const Fixture *f, const char *machine, QpMode mode,
          const char *const *extra)
{
  return rewritten_warn(f, machine, mode, extra, NULL);
}

/* The guest node qemu-pin should give the disk here: the host node of
 * its file is node 0 or unknown on a one-node host, and both guest nodes
 * are on host node 0, so guest node 0. NULL (skip) when the file is on no
 * PCI block device. */
static gboolean
disk_on_pci(const Fixture *f)
{
  const char *why = NULL;
  g_autofree char *bdf = qp_sysfs_path_pci("/sys", f->disk, &why);
  if (bdf == NULL)
    g_test_skip(why);
  return bdf != NULL;
}

static gboolean
has_arg(char **argv, const char *want)
{
  for (guint i = 0; argv[i] != NULL; i++)
    if (strcmp(argv[i], want) == 0)
      return TRUE;
  return FALSE;
}

static gboolean
has_prefix(char **argv, const char *prefix)
{
  for (guint i = 0; argv[i] != NULL; i++)
    if (g_str_has_prefix(argv[i], prefix))
      return TRUE;
  return FALSE;
}

/* QEMU 7.2 starts with ARGV (argv[0] left out). */
static void
assert_qemu_accepts(char **argv)
{
  QpTestQemuView v;
  qp_test_qemu_view((const char *const *)argv + 1, &v);
  if (!v.started)
    g_test_message("QEMU said: %s", v.err);
  g_assert_true(v.started);
  qp_test_qemu_view_clear(&v);
}

static void
test_q35(Fixture *f, gconstpointer data)
{
  if (!disk_on_pci(f))
    return;
  const char *extra[] = {"-device",
                         "virtio-blk-pci,drive=d0,iothread=io0,id=disk0", NULL};
  g_auto(GStrv) argv = rewritten(f, "q35", QP_MODE_NUMA, extra);
  g_assert_true(has_arg(
      argv, "pxb-pcie,id=qemu-pin-pxb0,bus_nr=240,numa_node=0,bus=pcie.0"));
  g_assert_true(has_arg(
      argv, "pcie-root-port,id=qemu-pin-rp0,bus=qemu-pin-pxb0,chassis=224"));
  g_assert_true(has_arg(
      argv, "virtio-blk-pci,drive=d0,iothread=io0,id=disk0,bus=qemu-pin-rp0"));
  g_assert_false(
      has_arg(argv, "virtio-blk-pci,drive=d0,iothread=io0,id=disk0"));
  assert_qemu_accepts(argv);
}

static void
test_pc_json(Fixture *f, gconstpointer data)
{
  if (!disk_on_pci(f))
    return;
  const char *extra[] = {
      "-device",
      "{\"driver\":\"virtio-blk-pci\",\"drive\":\"d0\",\"id\":\"disk0\"}",
      NULL};
  g_auto(GStrv) argv = rewritten(f, "pc", QP_MODE_NUMA, extra);
  g_assert_true(
      has_arg(argv, "pxb,id=qemu-pin-pxb0,bus_nr=240,numa_node=0,bus=pci.0"));
  g_assert_true(has_prefix(argv,
                           "{\"driver\":\"virtio-blk-pci\",\"drive\":\"d0\","
                           "\"id\":\"disk0\",\"bus\":\"qemu-pin-pxb0\"}"));
  assert_qemu_accepts(argv);
}

/* Left alone: a bus or address of the caller's, an expander of the
 * caller's, and balanced mode (the guest nodes are not placed per host
 * node). */
static void
test_left_alone(Fixture *f, gconstpointer data)
{
  if (!disk_on_pci(f))
    return;
  const char *fixed[] = {
      "-device", "virtio-blk-pci,drive=d0,id=disk0,bus=pcie.0,addr=0x5", NULL};
  g_auto(GStrv) a1 = rewritten(f, "q35", QP_MODE_NUMA, fixed);
  g_assert_false(has_prefix(a1, "pxb"));
  const char *addr[] = {"-device", "virtio-blk-pci,drive=d0,addr=0x6", NULL};
  g_auto(GStrv) a2 = rewritten(f, "q35", QP_MODE_NUMA, addr);
  g_assert_false(has_prefix(a2, "pxb"));
  const char *own[] = {"-device", "pxb-pcie,id=mine,bus_nr=100,numa_node=1",
                       "-device", "virtio-blk-pci,drive=d0", NULL};
  g_auto(GStrv) a3 = rewritten(f, "q35", QP_MODE_NUMA, own);
  g_assert_false(has_prefix(a3, "pxb-pcie,id=qemu-pin"));
  const char *plain[] = {"-device", "virtio-blk-pci,drive=d0", NULL};
  g_auto(GStrv) a4 = rewritten(f, "q35", QP_MODE_BALANCED, plain);
  g_assert_false(has_prefix(a4, "pxb"));
  assert_qemu_accepts(a1);
}

/* The caller's own expander puts the disk on guest node 1, whose host
 * node is not the disk's (both guest nodes are on host node 0 here, and
 * the disk's guest node is the first of them): one warning, the line
 * kept. */
static void
test_crossing_warning(Fixture *f, gconstpointer data)
{
  if (!disk_on_pci(f))
    return;
  const char *own[] = {
      "-device", "pxb-pcie,id=mine,bus_nr=100,numa_node=1,bus=pcie.0",
      "-device", "pcie-root-port,id=rp9,bus=mine,chassis=3",
      "-device", "virtio-blk-pci,drive=d0,id=disk0,bus=rp9",
      NULL};
  g_autofree char *warning = NULL;
  g_auto(GStrv) argv = rewritten_warn(f, "q35", QP_MODE_NUMA, own, &warning);
  g_assert_nonnull(warning);
  g_assert_nonnull(strstr(warning, "disk0"));
  g_assert_nonnull(strstr(warning, "is on guest node 1 (bus rp9)"));
  g_assert_nonnull(strstr(warning, "guest node 0's"));
  g_assert_true(has_arg(argv, "virtio-blk-pci,drive=d0,id=disk0,bus=rp9"));
  g_assert_false(has_prefix(argv, "pxb-pcie,id=qemu-pin"));
  assert_qemu_accepts(argv);

  /* On guest node 0 it is where it belongs: no warning. */
  const char *right[] = {
      "-device", "pxb-pcie,id=mine,bus_nr=100,numa_node=0,bus=pcie.0",
      "-device", "pcie-root-port,id=rp9,bus=mine,chassis=3",
      "-device", "virtio-blk-pci,drive=d0,id=disk0,bus=rp9",
      NULL};
  g_autofree char *none = NULL;
  g_auto(GStrv) argv2 = rewritten_warn(f, "q35", QP_MODE_NUMA, right, &none);
  g_assert_null(none);
  g_assert_true(has_arg(argv2, "virtio-blk-pci,drive=d0,id=disk0,bus=rp9"));
}

/* --vnuma=auto (one-to-one) on a recorded two-node host (dcs8000z-io.xml, whose
 * 0000:00:02.0 is on host node 0, the PCI device of this machine's disk
 * here): the guest nodes qemu-pin suggests, and the disk on the one
 * mirroring host node 0. Skips when this machine's disk is elsewhere. */
static void
test_vnuma_auto(Fixture *f, gconstpointer data)
{
  const char *why = NULL;
  g_autofree char *bdf = qp_sysfs_path_pci("/sys", f->disk, &why);
  if (bdf == NULL || strcmp(bdf, "0000:00:02.0") != 0) {
    g_test_skip("this machine's disk is not 0000:00:02.0");
    return;
  }
  g_autofree char *drive =
      g_strdup_printf("file=%s,if=none,id=d0,format=raw", f->disk);
  char *args[] = {"-machine", "q35",
                  "-m",       "512",
                  "-smp",     "12",
                  "-drive",   drive,
                  "-device",  "virtio-blk-pci,drive=d0,id=disk0",
                  NULL};
  g_autoptr(GError) error = NULL;
  g_autoptr(QpQemuArgs) a = NULL;
  g_autoptr(QpPlan) plan =
      plan_args(G_N_ELEMENTS(args) - 1, args, "dcs8000z-io.xml",
                QP_MODE_ONE_TO_ONE, TRUE, &a);
  g_assert_cmpuint(plan->n_vnodes, ==, 2);
  int g = -1;
  for (guint i = 0; i < plan->n_vnodes; i++)
    if (plan->vnodes[i].host_node == 0)
      g = plan->vnodes[i].id;
  g_assert_cmpint(g, >=, 0);
  g_auto(GStrv) argv = qp_qemu_args_rewrite(a, "qemu", plan, -1, &error);
  g_assert_no_error(error);
  g_autofree char *pxb = g_strdup_printf(
      "pxb-pcie,id=qemu-pin-pxb%d,bus_nr=240,numa_node=%d,bus=pcie.0", g, g);
  g_assert_true(has_arg(argv, pxb));
  /* This machine has host node 0 only: the memory the recorded host binds
   * to node 1 is bound to node 0 for QEMU to start here. */
  for (guint i = 0; argv[i] != NULL; i++) {
    char *at = strstr(argv[i], "host-nodes=1");
    if (at != NULL)
      at[strlen("host-nodes=")] = '0';
  }
  assert_qemu_accepts(argv);
}

/* A vfio-pci device (the recorded intel-2s-smt host's 0000:af:00.0, on
 * host node 1) goes on the guest node whose RAM is on host node 1; its
 * own bus= keeps another where it is. Not started: there is no such
 * device here. */
static void
test_vfio(Fixture *f, gconstpointer data)
{
  char *args[] = {"-machine", "q35",
                  "-m",       "512",
                  "-smp",     "2",
                  "-object",  "memory-backend-ram,id=m0,size=256M",
                  "-object",  "memory-backend-ram,id=m1,size=256M",
                  "-numa",    "node,nodeid=0,cpus=0,memdev=m0",
                  "-numa",    "node,nodeid=1,cpus=1,memdev=m1",
                  "-device",  "vfio-pci,host=0000:af:00.0,id=gpu",
                  "-device",  "vfio-pci,host=0000:3b:00.0,id=nic,bus=pcie.0",
                  NULL};
  g_autoptr(GError) error = NULL;
  g_autoptr(QpQemuArgs) a = NULL;
  g_autoptr(QpPlan) plan =
      plan_args(G_N_ELEMENTS(args) - 1, args, "intel-2s-smt.xml", QP_MODE_NUMA,
                FALSE, &a);
  int g = -1;
  for (guint m = 0; m < plan->n_mem; m++)
    if (plan->mem[m].gnode >= 0 &&
        hwloc_bitmap_isset(plan->mem[m].host_nodes, 1) && g < 0)
      g = plan->mem[m].gnode;
  g_assert_cmpint(g, >=, 0);
  g_auto(GStrv) argv = qp_qemu_args_rewrite(a, "qemu", plan, -1, &error);
  g_assert_no_error(error);
  g_autofree char *pxb = g_strdup_printf(
      "pxb-pcie,id=qemu-pin-pxb%d,bus_nr=240,numa_node=%d,bus=pcie.0", g, g);
  g_assert_true(has_arg(argv, pxb));
  g_assert_true(
      has_arg(argv, "vfio-pci,host=0000:af:00.0,id=gpu,bus=qemu-pin-rp0"));
  g_assert_true(has_arg(argv, "vfio-pci,host=0000:3b:00.0,id=nic,bus=pcie.0"));
  g_assert_false(has_arg(argv, "vfio-pci,host=0000:af:00.0,id=gpu"));
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add("/device-buses/q35", Fixture, NULL, setup, test_q35, teardown);
  g_test_add("/device-buses/pc-json", Fixture, NULL, setup, test_pc_json,
             teardown);
  g_test_add("/device-buses/left-alone", Fixture, NULL, setup, test_left_alone,
             teardown);
  g_test_add("/device-buses/crossing-warning", Fixture, NULL, setup,
             test_crossing_warning, teardown);
  g_test_add("/device-buses/vnuma-auto", Fixture, NULL, setup, test_vnuma_auto,
             teardown);
  g_test_add("/device-buses/vfio", Fixture, NULL, setup, test_vfio, teardown);
  return g_test_run();
}
