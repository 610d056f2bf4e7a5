/* vfio-pci devices named by sysfsdev=: a mediated device
 * (/sys/bus/mdev/devices/UUID, a vGPU) resolves under its parent PCI device,
 * whose host node is the device's locality. The sysfs tree is a fake one in
 * a temporary directory: sysfsdev= is any path QEMU opens, so the tree can
 * live anywhere. Plans are made on the recorded intel-2s-smt host, which has
 * 0000:3b:00.0 on node 0 and 0000:af:00.0 on node 1. */
#include <string.h>
#include <unistd.h>

#include "launcher/qemu/args.h"
#include "tests/common/qp-test-args.h"
#include "tests/common/qp-test.h"

#define MDEV "53764d0e-85a0-42b4-af5c-2046b460b1dc"

typedef struct {
  char *dir;
  char *mdev;     /* DIR/sys/bus/mdev/devices/MDEV, parent 0000:3b:00.0 */
  char *pci;      /* DIR/sys/bus/pci/devices/0000:af:00.0 */
  char *gone;     /* an mdev path that does not exist */
  char *topology; /* intel-2s-smt.xml */
} Fixture;

static void
make_dir(const char *path)
{
  g_assert_cmpint(g_mkdir_with_parents(path, 0755), ==, 0);
}

static void
make_link(const char *target, const char *path)
{
  g_autofree char *parent = g_path_get_dirname(path);
  make_dir(parent);
  g_assert_cmpint(symlink(target, path), ==, 0);
}

static void
setup(Fixture *f, gconstpointer data)
{
  f->dir = qp_test_tmpdir();
  /* The devices as the kernel lays them out, and the bus views that link
   * to them. */
  g_autofree char *parent = g_build_filename(
      f->dir, "sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0", NULL);
  g_autofree char *mdev_dir = g_build_filename(parent, MDEV, NULL);
  make_dir(mdev_dir);
  g_autofree char *gpu = g_build_filename(
      f->dir, "sys/devices/pci0000:ae/0000:ae:00.0/0000:af:00.0", NULL);
  make_dir(gpu);
  f->mdev = g_build_filename(f->dir, "sys/bus/mdev/devices", MDEV, NULL);
  make_link("../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/" MDEV,
            f->mdev);
  f->pci = g_build_filename(f->dir, "sys/bus/pci/devices/0000:af:00.0", NULL);
  make_link("../../../devices/pci0000:ae/0000:ae:00.0/0000:af:00.0", f->pci);
  f->gone = g_build_filename(f->dir, "sys/bus/mdev/devices",
                             "00000000-0000-0000-0000-000000000000", NULL);
  f->topology =
      g_build_filename(g_getenv("QP_TOPOLOGIES"), "intel-2s-smt.xml", NULL);
}

static void
teardown(Fixture *f, gconstpointer data)
{
  qp_test_rmtree(f->dir);
  g_free(f->dir);
  g_free(f->mdev);
  g_free(f->pci);
  g_free(f->gone);
  g_free(f->topology);
}

static void
test_parent_address(Fixture *f, gconstpointer data)
{
  g_autofree char *kv =
      g_strdup_printf("vfio-pci,sysfsdev=%s,id=hostdev0", f->mdev);
  g_autofree char *json = g_strdup_printf(
      "{\"driver\":\"vfio-pci\",\"sysfsdev\":\"%s\",\"id\":\"hostdev1\"}",
      f->pci);
  g_autofree char *gone = g_strdup_printf("vfio-pci,sysfsdev=%s", f->gone);
  const char *argv[] = {"-device", kv, "-device", json, "-device", gone, NULL};
  g_autoptr(QpQemuArgs) a = qp_test_parse_ok(argv);
  g_assert_nonnull(a->req->vfio);
  g_assert_cmpuint(g_strv_length(a->req->vfio), ==, 3);
  /* The mdev's parent, the PCI device itself, and a device not on this
   * host, named by its path. */
  g_assert_cmpstr(a->req->vfio[0], ==, "0000:3b:00.0");
  g_assert_cmpstr(a->req->vfio[1], ==, "0000:af:00.0");
  g_assert_cmpstr(a->req->vfio[2], ==, f->gone);
}

/* `qemu-pin plan` on the recorded host; returns the exit status and the
 * plan's host nodes in *NODES (when it printed one). */
static int
plan(Fixture *f, const char *mode, const char *locality, const char *device,
     char **nodes, char **err)
{
  g_autofree char *m = g_strdup_printf("--mode=%s", mode);
  g_autofree char *t = g_strdup_printf("--topology=%s", f->topology);
  g_autofree char *l = g_strdup_printf("--device-locality=%s", locality);
  g_autofree char *s = g_build_filename(f->dir, "state", NULL);
  g_autofree char *sd = g_strdup_printf("--state-dir=%s", s);
  const char *argv[] = {qp_test_binary(),
                        "plan",
                        m,
                        t,
                        l,
                        sd,
                        "--config=/dev/null",
                        "--",
                        "qemu-system-x86_64",
                        "-smp",
                        "2",
                        "-m",
                        "1G",
                        "-device",
                        device,
                        NULL};
  QpTestRun r;
  qp_test_run((char **)argv, NULL, &r);
  *err = g_strdup(r.err);
  *nodes = NULL;
  g_autoptr(JsonParser) parser = json_parser_new();
  if (r.status == 0 && json_parser_load_from_data(parser, r.out, -1, NULL)) {
    JsonObject *o = json_node_get_object(json_parser_get_root(parser));
    if (json_object_has_member(o, "host-nodes"))
      *nodes = g_strdup(json_object_get_string_member(o, "host-nodes"));
  }
  int status = r.status;
  qp_test_run_clear(&r);
  return status;
}

static void
test_every_mode(Fixture *f, gconstpointer data)
{
  static const char *const modes[] = {"auto", "balanced", "numa", "one-to-one",
                                      "none"};
  g_autofree char *mdev = g_strdup_printf("vfio-pci,sysfsdev=%s", f->mdev);
  g_autofree char *pci =
      g_strdup_printf("{\"driver\":\"vfio-pci\",\"sysfsdev\":\"%s\"}", f->pci);
  for (guint i = 0; i < G_N_ELEMENTS(modes); i++) {
    g_autofree char *n1 = NULL, *n2 = NULL, *e1 = NULL, *e2 = NULL;
    g_assert_cmpint(plan(f, modes[i], "required", mdev, &n1, &e1), ==, 0);
    g_assert_cmpint(plan(f, modes[i], "required", pci, &n2, &e2), ==, 0);
    g_assert_cmpstr(e1, ==, "");
    g_assert_cmpstr(e2, ==, "");
    if (strcmp(modes[i], "none") == 0)
      continue;
    /* The guest goes where its device is. */
    g_assert_cmpstr(n1, ==, "0");
    g_assert_cmpstr(n2, ==, "1");
  }
}

/* A device whose node cannot be found is no refusal: the plan says so. */
static void
test_unknown_node(Fixture *f, gconstpointer data)
{
  g_autofree char *gone = g_strdup_printf("vfio-pci,sysfsdev=%s", f->gone);
  g_autofree char *nodes = NULL, *err = NULL;
  g_assert_cmpint(plan(f, "balanced", "preferred", gone, &nodes, &err), ==, 0);
  g_assert_nonnull(nodes);
  g_assert_nonnull(strstr(err, "is not on this host"));
  g_assert_nonnull(strstr(err, f->gone));
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add("/vfio/sysfsdev/parent-address", Fixture, NULL, setup,
             test_parent_address, teardown);
  g_test_add("/vfio/sysfsdev/every-mode", Fixture, NULL, setup, test_every_mode,
             teardown);
  g_test_add("/vfio/sysfsdev/unknown-node", Fixture, NULL, setup,
             test_unknown_node, teardown);
  return g_test_run();
}
