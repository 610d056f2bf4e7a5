/* -readconfig FILE: QEMU's config file format, read for what placement
 * needs (-machine, -smp, -m, -numa, -object, -device given there), merged
 * with the command line in QEMU's order. Each line is also run by the real
 * QEMU, whose vCPUs, memory and guest nodes must be what qemu-pin read. The
 * files are in tests/data/readconfig and tests/data/proxmox. */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launcher/qemu/args.h"
#include "launcher/qemu/daemonize.h"
#include "launcher/qemu/rewrite.h"
#include "tests/common/qp-test.h"

static char *
data(const char *name)
{
  return g_build_filename(g_getenv("G_TEST_SRCDIR"), "data", name, NULL);
}

/* Parses ARGS (@FILE@ is FILE under tests/data), checks it against QEMU's
 * own reading, and returns it. */
static QpQemuArgs *
parse_like_qemu(const char *const *args, const char *file)
{
  g_autofree char *path = data(file);
  g_autoptr(GPtrArray) argv = g_ptr_array_new();
  for (guint i = 0; args[i] != NULL; i++)
    g_ptr_array_add(argv,
                    strcmp(args[i], "@FILE@") == 0 ? path : (char *)args[i]);
  g_ptr_array_add(argv, NULL);

  g_autoptr(GError) error = NULL;
  QpQemuArgs *a =
      qp_qemu_args_parse(argv->len - 1, (char **)argv->pdata, &error);
  g_assert_no_error(error);

  QpTestQemuView view;
  qp_test_qemu_view((const char *const *)argv->pdata, &view);
  g_test_message("QEMU: %s", view.err);
  g_assert_true(view.started);
  g_assert_cmpuint(a->req->vcpus, ==, view.vcpus);
  g_assert_cmpuint(a->req->maxcpus, ==, view.maxcpus);
  g_assert_cmpuint(a->req->mem_mib, ==, view.ram_mib);
  g_assert_cmpuint(a->req->n_gnodes, ==, view.n_nodes);
  for (guint g = 0; g < view.n_nodes; g++)
    g_assert_cmpuint(a->req->gnodes[g].mem_mib, ==, view.node_mib[g]);
  qp_test_qemu_view_clear(&view);
  return a;
}

static void
test_smp_memory(void)
{
  const char *args[] = {"-readconfig", "@FILE@", NULL};
  g_autoptr(QpQemuArgs) a = parse_like_qemu(args, "readconfig/smp-memory.cfg");
  g_assert_cmpuint(a->req->vcpus, ==, 2);
  g_assert_cmpuint(a->req->maxcpus, ==, 4);
  g_assert_cmpuint(a->req->mem_mib, ==, 256);
  g_assert_cmpstr(a->machine, ==, "q35");
  g_assert_cmpuint(a->warnings->len, ==, 0);
}

/* The command line and the file merge in order: the later one wins. */
static void
test_order(void)
{
  const char *before[] = {"-m",          "512",    "-smp", "1",
                          "-readconfig", "@FILE@", NULL};
  g_autoptr(QpQemuArgs) a =
      parse_like_qemu(before, "readconfig/smp-memory.cfg");
  g_assert_cmpuint(a->req->mem_mib, ==, 256);
  g_assert_cmpuint(a->req->vcpus, ==, 2);
  const char *after[] = {"-readconfig", "@FILE@", "-m", "512",
                         "-smp",        "3",      NULL};
  g_autoptr(QpQemuArgs) b = parse_like_qemu(after, "readconfig/smp-memory.cfg");
  g_assert_cmpuint(b->req->mem_mib, ==, 512);
  g_assert_cmpuint(b->req->vcpus, ==, 3);
  g_assert_cmpuint(b->req->maxcpus, ==, 4);
}

/* Guest nodes and their memory backends from the file. Those backends
 * cannot get host-nodes on QEMU's command line: one warning says so. */
static void
test_numa(void)
{
  const char *args[] = {"-readconfig", "@FILE@", NULL};
  g_autoptr(QpQemuArgs) a = parse_like_qemu(args, "readconfig/numa.cfg");
  g_assert_cmpuint(a->req->n_gnodes, ==, 2);
  g_assert_cmpstr(a->req->gnodes[0].memdev, ==, "m0");
  g_assert_cmpstr(a->req->gnodes[1].memdev, ==, "m1");
  g_assert_cmpuint(a->backends->len, ==, 2);
  /* The file's backends are not rewritten: the process's memory policy
   * binds them, which is the plan's binding when its memory is on one host
   * node (a line for -v), and a warning when it spans more. */
  g_assert_cmpuint(a->warnings->len, ==, 0);
  QpPlan plan = {.mem_nodes = hwloc_bitmap_alloc()};
  hwloc_bitmap_set(plan.mem_nodes, 1);
  gboolean warning = TRUE;
  g_autofree char *one = qp_qemu_args_file_backends_say(a, &plan, &warning);
  g_assert_false(warning);
  g_assert_nonnull(strstr(one, "'m0', 'm1'"));
  hwloc_bitmap_set(plan.mem_nodes, 3);
  g_autofree char *two = qp_qemu_args_file_backends_say(a, &plan, &warning);
  g_assert_true(warning);
  g_assert_nonnull(strstr(two, "'m0', 'm1'"));
  g_assert_nonnull(strstr(two, "cannot be given host-nodes"));
  hwloc_bitmap_free(plan.mem_nodes);
}

/* Incus binds each guest node's backend in the file with a keyval list,
 * 'host-nodes.0 = "0"', which QEMU 7.2 takes: the backends are the
 * caller's, bound to host node 0, and nothing is refused. */
static void
test_host_nodes_list(void)
{
  const char *args[] = {"-readconfig", "@FILE@", NULL};
  g_autoptr(QpQemuArgs) a =
      parse_like_qemu(args, "readconfig/incus-host-nodes.cfg");
  g_assert_cmpuint(a->req->n_gnodes, ==, 2);
  g_assert_cmpuint(a->backends->len, ==, 2);
  for (guint i = 0; i < a->backends->len; i++) {
    const QpBackend *b = g_ptr_array_index(a->backends, i);
    g_assert_cmpint(b->policy, ==, QP_POLICY_BIND);
    g_assert_nonnull(b->host_nodes);
    g_assert_cmpint(hwloc_bitmap_weight(b->host_nodes), ==, 1);
    g_assert_true(hwloc_bitmap_isset(b->host_nodes, 0));
  }
  g_assert_cmpuint(a->warnings->len, ==, 0);
}

/* Proxmox's q35 file (devices only): nothing to plan, nothing to say. */
static void
test_proxmox(void)
{
  const char *args[] = {"-machine", "q35", "-readconfig", "@FILE@", "-smp",
                        "2",        "-m",  "512",         NULL};
  g_autoptr(QpQemuArgs) a = parse_like_qemu(args, "proxmox/pve-q35-4.0.cfg");
  g_assert_cmpuint(a->warnings->len, ==, 0);
  g_assert_cmpuint(a->notes->len, ==, 0);
  g_assert_null(a->req->vfio);
  g_assert_cmpuint(a->req->vcpus, ==, 2);
}

/* A file that cannot be read is one warning, no refusal: QEMU says the
 * rest itself. */
static void
test_unreadable(void)
{
  const char *argv[] = {"-readconfig", "/nonexistent/qemu.cfg", "-smp", "2",
                        NULL};
  g_autoptr(GError) error = NULL;
  g_autoptr(QpQemuArgs) a = qp_qemu_args_parse(4, (char **)argv, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(a->warnings->len, ==, 1);
  g_assert_nonnull(strstr(a->warnings->pdata[0], "/nonexistent/qemu.cfg"));
  g_assert_null(strchr(a->warnings->pdata[0], '\n'));
  g_assert_cmpuint(a->req->vcpus, ==, 2);

  /* A pipe is QEMU's to read (and would block here): left alone. */
  g_autofree char *dir = qp_test_tmpdir();
  g_autofree char *fifo = g_build_filename(dir, "fifo", NULL);
  g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
  const char *argv2[] = {"-readconfig", fifo, NULL};
  g_autoptr(QpQemuArgs) b = qp_qemu_args_parse(2, (char **)argv2, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(b->warnings->len, ==, 1);
  g_assert_nonnull(strstr(b->warnings->pdata[0], "not a regular file"));
  qp_test_rmtree(dir);
}

/* A vfio-pci device of a file counts for locality; a value with a comma
 * keeps it. */
static void
test_device(void)
{
  g_autofree char *dir = qp_test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "vfio.cfg", NULL);
  g_assert_true(g_file_set_contents(path,
                                    "[device \"hostdev0\"]\n"
                                    "  driver = \"vfio-pci\"\n"
                                    "  host = \"0000:3b:00.0\"\n"
                                    "[name]\n"
                                    "  guest = \"a,b\"\n"
                                    "[drive \"d0\"]\n"
                                    "  file = \"/dev/null\"\n",
                                    -1, NULL));
  const char *argv[] = {"-readconfig", path, NULL};
  g_autoptr(GError) error = NULL;
  g_autoptr(QpQemuArgs) a = qp_qemu_args_parse(2, (char **)argv, &error);
  g_assert_no_error(error);
  g_assert_nonnull(a->req->vfio);
  g_assert_cmpstr(a->req->vfio[0], ==, "0000:3b:00.0");
  g_assert_null(a->req->vfio[1]);
  g_assert_cmpuint(a->warnings->len, ==, 0);
  qp_test_rmtree(dir);
}

/* With -daemonize a prealloc-context would hang QEMU, and qemu-pin drops
 * it from the command line's backends before reading them; a backend of a
 * file stays as written (the file is the caller's), and the command line is
 * still rewritten. */
static void
test_daemonize_prealloc_context(void)
{
  g_autofree char *dir = qp_test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "tc.cfg", NULL);
  g_assert_true(g_file_set_contents(path,
                                    "[object \"tc0\"]\n"
                                    "  qom-type = \"thread-context\"\n"
                                    "[object \"m0\"]\n"
                                    "  qom-type = \"memory-backend-ram\"\n"
                                    "  size = \"128M\"\n"
                                    "  prealloc = \"on\"\n"
                                    "  prealloc-context = \"tc0\"\n",
                                    -1, NULL));
  const char *argv[] = {"-readconfig",
                        path,
                        "-daemonize",
                        "-object",
                        "thread-context,id=tc1",
                        "-object",
                        "memory-backend-ram,id=m1,size=64M,prealloc=on,"
                        "prealloc-context=tc1",
                        "-machine",
                        "memory-backend=m0",
                        NULL};
  g_autoptr(GError) error = NULL;
  g_autofree char *dropped = NULL;
  g_auto(GStrv) safe =
      qp_argv_daemonize_safe(G_N_ELEMENTS(argv) - 1, (char **)argv, &dropped);
  g_assert_nonnull(safe);
  g_assert_cmpstr(dropped, ==, "m1");
  g_autoptr(QpQemuArgs) a =
      qp_qemu_args_parse(G_N_ELEMENTS(argv) - 1, safe, &error);
  g_assert_no_error(error);
  g_auto(GStrv) out = qp_qemu_args_rewrite(a, "qemu", NULL, -1, &error);
  g_assert_no_error(error);
  g_autofree char *line = g_strjoinv(" ", out);
  g_assert_nonnull(strstr(line, "memory-backend-ram,id=m1,size=64M,"
                                "prealloc=on "));
  g_assert_nonnull(strstr(line, "-readconfig "));
  g_assert_null(strstr(line, "id=m0"));
  qp_test_rmtree(dir);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/readconfig/smp-memory", test_smp_memory);
  g_test_add_func("/readconfig/order", test_order);
  g_test_add_func("/readconfig/numa", test_numa);
  g_test_add_func("/readconfig/host-nodes-list", test_host_nodes_list);
  g_test_add_func("/readconfig/proxmox-q35", test_proxmox);
  g_test_add_func("/readconfig/unreadable", test_unreadable);
  g_test_add_func("/readconfig/device", test_device);
  g_test_add_func("/readconfig/daemonize-prealloc-context",
                  test_daemonize_prealloc_context);
  return g_test_run();
}
