/* hwloc's report of invalid topology information ("hwloc received invalid
 * information from the operating system", 15 lines) never reaches qemu-pin's
 * stderr; at -v one qemu-pin line says the host's distances are
 * inconsistent. The host is a fake Linux sysfs that hwloc reads through
 * HWLOC_FSROOT: 2 packages of 2 nodes (2 CPUs each) whose firmware distances
 * make nodes 0 and 2, in different packages, the closest pair, so hwloc's
 * distance group crosses both packages. */
#include <string.h>

#include "tests/common/qp-test.h"
#include "topology/host/host.h"

static void
put(const char *root, const char *path, const char *text)
{
  g_autofree char *full = g_build_filename(root, path, NULL);
  g_autofree char *dir = g_path_get_dirname(full);
  g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
  g_autoptr(GError) error = NULL;
  g_file_set_contents(full, text, -1, &error);
  g_assert_no_error(error);
}

/* A sysfs of 8 CPUs: package p = CPUs 4p..4p+3, node n = CPUs 2n, 2n+1, one
 * core per CPU. DISTANCE holds the 4 rows of the node distance matrix. */
static char *
fake_host(const char *const distance[4])
{
  char *root = qp_test_tmpdir();
  put(root, "sys/devices/system/cpu/online", "0-7\n");
  put(root, "sys/devices/system/cpu/possible", "0-7\n");
  put(root, "sys/devices/system/cpu/present", "0-7\n");
  for (guint c = 0; c < 8; c++) {
    g_autofree char *d = g_strdup_printf("sys/devices/system/cpu/cpu%u", c);
    g_autofree char *p = g_strdup_printf("%u\n", c / 4);
    g_autofree char *core = g_strdup_printf("%u\n", c % 4);
    g_autofree char *self = g_strdup_printf("%02x\n", 1u << c);
    g_autofree char *self_list = g_strdup_printf("%u\n", c);
    const char *pkg = c / 4 == 0 ? "0f\n" : "f0\n";
    const char *pkg_list = c / 4 == 0 ? "0-3\n" : "4-7\n";
    const struct {
      const char *name, *text;
    } files[] = {
        {"online", "1\n"},
        {"topology/physical_package_id", p},
        {"topology/die_id", "0\n"},
        {"topology/core_id", core},
        {"topology/thread_siblings", self},
        {"topology/thread_siblings_list", self_list},
        {"topology/core_cpus", self},
        {"topology/core_cpus_list", self_list},
        {"topology/core_siblings", pkg},
        {"topology/core_siblings_list", pkg_list},
        {"topology/package_cpus", pkg},
        {"topology/package_cpus_list", pkg_list},
    };
    for (guint k = 0; k < G_N_ELEMENTS(files); k++) {
      g_autofree char *f = g_strdup_printf("%s/%s", d, files[k].name);
      put(root, f, files[k].text);
    }
  }
  const char *node = "sys/devices/system/node";
  for (guint k = 0; k < 4; k++) {
    const char *lists[] = {"online", "possible", "has_cpu",
                           "has_normal_memory"};
    g_autofree char *f = g_strdup_printf("%s/%s", node, lists[k]);
    put(root, f, "0-3\n");
  }
  for (guint n = 0; n < 4; n++) {
    g_autofree char *d = g_strdup_printf("%s/node%u", node, n);
    g_autofree char *map = g_strdup_printf("%02x\n", 3u << (2 * n));
    g_autofree char *list = g_strdup_printf("%u-%u\n", 2 * n, 2 * n + 1);
    g_autofree char *dist = g_strdup_printf("%s\n", distance[n]);
    g_autofree char *mem =
        g_strdup_printf("Node %u MemTotal:        1048576 kB\n"
                        "Node %u MemFree:         1000000 kB\n",
                        n, n);
    const struct {
      const char *name, *text;
    } files[] = {{"cpumap", map},
                 {"cpulist", list},
                 {"distance", dist},
                 {"meminfo", mem}};
    for (guint k = 0; k < G_N_ELEMENTS(files); k++) {
      g_autofree char *f = g_strdup_printf("%s/%s", d, files[k].name);
      put(root, f, files[k].text);
    }
  }
  put(root, "proc/meminfo",
      "MemTotal:        4194304 kB\nMemFree:         4000000 kB\n"
      "Hugepagesize:       2048 kB\n");
  return root;
}

/* Nodes 0 and 2 closest: their group crosses both packages. */
static const char *const crossing[4] = {"10 20 11 20", "20 10 20 11",
                                        "11 20 10 20", "20 11 20 10"};
/* Nodes of a package closest: groups are the packages. */
static const char *const agreeing[4] = {"10 11 20 20", "11 10 20 20",
                                        "20 20 10 11", "20 20 11 10"};

static void
run(const char *root, const char *const *args, QpTestRun *r)
{
  g_auto(GStrv) envp = g_get_environ();
  envp = g_environ_setenv(envp, "HWLOC_FSROOT", root, TRUE);
  envp = g_environ_unsetenv(envp, "HWLOC_HIDE_ERRORS");
  g_autofree char *state = g_build_filename(root, "state", NULL);
  envp = g_environ_setenv(envp, "QEMU_PIN_STATE_DIR", state, TRUE);
  envp = g_environ_setenv(envp, "QEMU_PIN_CONFIG", "/dev/null", TRUE);
  g_autoptr(GPtrArray) argv = g_ptr_array_new();
  g_ptr_array_add(argv, (char *)qp_test_binary());
  for (guint i = 0; args[i] != NULL; i++)
    g_ptr_array_add(argv, (char *)args[i]);
  g_ptr_array_add(argv, NULL);
  qp_test_run((char **)argv->pdata, envp, r);
  g_test_message("%s: status %d, stderr: %s", args[0], r->status, r->err);
}

/* The fake host makes hwloc itself print its banner: the test is real. */
static void
test_hwloc_reports_it(void)
{
  g_autofree char *lstopo = g_find_program_in_path("lstopo-no-graphics");
  if (lstopo == NULL) {
    g_test_skip("lstopo-no-graphics (package hwloc) is not installed");
    return;
  }
  g_autofree char *root = fake_host(crossing);
  g_auto(GStrv) envp = g_get_environ();
  envp = g_environ_setenv(envp, "HWLOC_FSROOT", root, TRUE);
  envp = g_environ_unsetenv(envp, "HWLOC_HIDE_ERRORS");
  char *argv[] = {lstopo, NULL};
  QpTestRun r;
  qp_test_run(argv, envp, &r);
  g_assert_nonnull(
      strstr(r.err, "received invalid information from the operating system"));
  qp_test_run_clear(&r);
  qp_test_rmtree(root);
}

static void
test_banner_hidden(void)
{
  g_autofree char *root = fake_host(crossing);
  const char *topology[] = {"topology", NULL};
  const char *plan[] = {"plan", "--", "qemu-system-x86_64", "-m", "64", NULL};
  const char *const *quiet[] = {topology, plan};
  for (guint k = 0; k < G_N_ELEMENTS(quiet); k++) {
    QpTestRun r;
    run(root, quiet[k], &r);
    g_assert_cmpint(r.status, ==, 0);
    g_assert_cmpstr(r.err, ==, "");
    qp_test_run_clear(&r);
  }
  /* -v: one line of qemu-pin's own, naming the nodes. */
  const char *verbose[] = {"topology", "-v", NULL};
  QpTestRun r;
  run(root, verbose, &r);
  g_assert_cmpint(r.status, ==, 0);
  g_assert_true(g_str_has_prefix(r.err, "qemu-pin: "));
  g_assert_nonnull(strstr(r.err, "distances are inconsistent"));
  g_assert_nonnull(strstr(r.err, "nodes 0,2"));
  g_assert_cmpuint(strlen(r.err), >, 0);
  g_assert_true(strchr(r.err, '\n') == r.err + strlen(r.err) - 1);
  qp_test_run_clear(&r);
  qp_test_rmtree(root);
}

/* The host model says which group crosses which packages, and nothing for a
 * host whose distances agree with its packages. */
static void
test_model(void)
{
  g_autofree char *bad = fake_host(crossing);
  g_autofree char *good = fake_host(agreeing);
  g_autoptr(GError) error = NULL;
  g_setenv("HWLOC_FSROOT", bad, TRUE);
  g_autoptr(QpHost) h1 = qp_host_load(NULL, &error);
  g_assert_no_error(error);
  g_setenv("HWLOC_FSROOT", good, TRUE);
  g_autoptr(QpHost) h2 = qp_host_load(NULL, &error);
  g_assert_no_error(error);
  g_unsetenv("HWLOC_FSROOT");
  g_assert_cmpuint(h1->n_nodes, ==, 4);
  g_assert_nonnull(h1->inconsistent);
  g_assert_nonnull(strstr(h1->inconsistent, "nodes 0,2"));
  g_assert_nonnull(strstr(h1->inconsistent, "packages 0-1"));
  g_assert_cmpuint(h2->n_nodes, ==, 4);
  g_assert_null(h2->inconsistent);
  /* The recorded hosts agree with themselves. */
  const char *recorded[] = {"2s-8node.xml", "intel-2s-smt.xml",
                            "epyc-7351p.xml", "cpuless.xml"};
  for (guint i = 0; i < G_N_ELEMENTS(recorded); i++) {
    g_autofree char *xml =
        g_build_filename(g_getenv("QP_TOPOLOGIES"), recorded[i], NULL);
    g_autoptr(QpHost) h = qp_host_load(xml, &error);
    g_assert_no_error(error);
    g_assert_null(h->inconsistent);
  }
  qp_test_rmtree(bad);
  qp_test_rmtree(good);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/hwloc-errors/fake-host-makes-hwloc-report",
                  test_hwloc_reports_it);
  g_test_add_func("/hwloc-errors/banner-hidden", test_banner_hidden);
  g_test_add_func("/hwloc-errors/model", test_model);
  return g_test_run();
}
