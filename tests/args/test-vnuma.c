/* --vnuma=auto with hot-pluggable vCPUs (maxcpus above cpus): the guest
 * topology qemu-pin writes (-smp and -numa) covers every possible vCPU, so
 * QEMU accepts it ("Invalid CPU topology" otherwise) and puts each vCPU in
 * the guest node the plan says. */
#include <signal.h>
#include <string.h>

#include "launcher/qemu/args.h"
#include "launcher/qemu/rewrite.h"
#include "tests/common/qp-test-args.h"
#include "tests/common/qp-test.h"
#include "topology/host/host.h"

/* The guest node the plan gives vCPU V, -1 if none. */
static int
plan_vnode_of(const QpPlan *plan, guint v)
{
  for (guint x = 0; x < plan->n_vnodes; x++)
    if (hwloc_bitmap_isset(plan->vnodes[x].vcpus, v))
      return plan->vnodes[x].id;
  return -1;
}

typedef struct {
  const char *name;
  const char *smp;
  guint vnodes; /* guest nodes the plan suggests */
} Case;

static const Case cases[] = {
    {"6-of-8", "6,maxcpus=8", 2},
    {"8-of-12", "8,maxcpus=12", 2},
    {"6-of-8-threads", "6,maxcpus=8,threads=2", 2},
    {"4-of-8-one-node", "4,maxcpus=8,sockets=2,cores=2,threads=2", 0},
    {"all-boot", "8", 2},
};

/* The one-to-one plan with --vnuma=auto of ARGV (parsed into *ARGS) on the
 * recorded 2s-8node host (4 cores per node). */
static QpPlan *
vnuma_plan(const char *const *argv, QpQemuArgs **args)
{
  g_autofree char *xml =
      g_build_filename(g_getenv("QP_TOPOLOGIES"), "2s-8node.xml", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(QpHost) host = qp_host_load(xml, &error);
  g_assert_no_error(error);
  *args = qp_test_parse_ok(argv);
  QpPlacementOptions opts;
  qp_placement_options_init(&opts);
  opts.mode = QP_MODE_ONE_TO_ONE;
  opts.vnuma = TRUE;
  QpPlan *plan = qp_plan_compute(host, NULL, (*args)->req, &opts, &error);
  qp_placement_options_clear(&opts);
  g_assert_no_error(error);
  return plan;
}

/* A one-to-one plan on the recorded 2s-8node host (4 cores per node), its
 * argv rewritten and run by the real QEMU. This host has one node: the
 * rewritten backends are bound to node 0 here, which changes nothing QEMU
 * checks about the topology. */
static void
test_recorded_host(gconstpointer data)
{
  const Case *c = data;
  const char *argv[] = {"-smp", c->smp, "-m", "512", NULL};
  g_autoptr(QpQemuArgs) args = NULL;
  g_autoptr(QpPlan) plan = vnuma_plan(argv, &args);
  g_autoptr(GError) error = NULL;
  g_assert_true(plan->vnuma);
  g_assert_cmpuint(plan->n_vnodes, ==, c->vnodes);
  g_assert_cmpuint(plan->vnuma_sockets * plan->vnuma_cores *
                       plan->vnuma_threads,
                   ==, args->req->maxcpus);

  g_auto(GStrv) out =
      qp_qemu_args_rewrite(args, "qemu-system-x86_64", plan, -1, &error);
  g_assert_no_error(error);
  g_autoptr(GPtrArray) run = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GRegex) nodes = g_regex_new("host-nodes=[0-9]+", 0, 0, NULL);
  for (guint i = 1; out[i] != NULL; i++)
    g_ptr_array_add(run, g_regex_replace_literal(nodes, out[i], -1, 0,
                                                 "host-nodes=0", 0, NULL));
  g_ptr_array_add(run, NULL);
  g_autofree char *line = g_strjoinv(" ", (char **)run->pdata);
  g_test_message("QEMU args: %s", line);

  QpTestQemuView view;
  qp_test_qemu_view((const char *const *)run->pdata, &view);
  g_test_message("QEMU: %s", view.err);
  g_assert_true(view.started);
  g_assert_cmpuint(view.vcpus, ==, args->req->vcpus);
  g_assert_cmpuint(view.maxcpus, ==, args->req->maxcpus);
  g_assert_cmpuint(view.n_nodes, ==, plan->n_vnodes);
  for (guint v = 0; v < view.maxcpus; v++)
    g_assert_cmpint(view.cpu_node[v], ==, plan_vnode_of(plan, v));
  guint64 total = 0;
  for (guint x = 0; x < view.n_nodes; x++) {
    g_assert_cmpuint(view.node_mib[x], ==, plan->vnodes[x].mem_mib);
    total += view.node_mib[x];
  }
  g_assert_cmpuint(view.n_nodes > 0 ? total : view.ram_mib, ==, 512);
  qp_test_qemu_view_clear(&view);
}

/* --vnuma=auto with a vCPU plugged by -device at start (libvirt's
 * hot-pluggable vCPUs enabled at boot): the device names its slot in the
 * caller's -smp topology, which a suggested one would renumber, and the
 * rewritten -smp cpus= counted it, so QEMU found its slot taken ("CPU[1]
 * with APIC ID 1 exists") and refused a line it takes without qemu-pin.
 * No guest topology is suggested; QEMU runs the line, vCPUs 0 and 3. */
static void
test_cpu_device_at_start(void)
{
  const char *argv[] = {
      "-smp",    "1,maxcpus=4",
      "-device", "qemu64-x86_64-cpu,socket-id=0,core-id=3,thread-id=0",
      "-m",      "512",
      NULL};
  g_autoptr(QpQemuArgs) args = NULL;
  g_autoptr(QpPlan) plan = vnuma_plan(argv, &args);
  g_autoptr(GError) error = NULL;

  g_auto(GStrv) out =
      qp_qemu_args_rewrite(args, "qemu-system-x86_64", plan, -1, &error);
  g_assert_no_error(error);
  g_autofree char *line = g_strjoinv(" ", out + 1);
  g_test_message("QEMU args: %s", line);
  QpTestQemuView view;
  qp_test_qemu_view((const char *const *)out + 1, &view);
  g_test_message("QEMU: %s", view.err);
  g_assert_true(view.started);
  g_assert_cmpstr(view.boot, ==, "0,3");
  g_assert_cmpuint(view.maxcpus, ==, 4);
  qp_test_qemu_view_clear(&view);
  g_assert_false(plan->vnuma);
  g_assert_cmpuint(plan->n_vnodes, ==, 0);
  gboolean said = FALSE;
  for (guint i = 0; i < plan->reasons->len; i++)
    said |= strstr(plan->reasons->pdata[i], "--vnuma: no guest topology "
                                            "suggested: vCPUs plugged") != NULL;
  g_assert_true(said);
}

/* The L3 domain of the CPUs of vCPU V, -1 if none. */
static int
plan_l3_of(const QpHost *host, const QpPlan *plan, guint v)
{
  for (guint d = 0; d < host->n_domains; d++)
    if (host->domains[d].level == QP_CACHE_L3 &&
        hwloc_bitmap_isincluded(plan->vcpu_cpus[v], host->domains[d].cpus))
      return (int)d;
  return -1;
}

typedef struct {
  const char *smp;
  guint dies; /* per socket in the rewritten -smp */
} DieCase;

static const DieCase die_cases[] = {
    {"4", 2},           /* one node: 2 L3s of 2 cores */
    {"8", 2},           /* two nodes: sockets=2, each 2 L3s */
    {"4,threads=2", 1}, /* 2 sibling pairs: both in one L3 */
    {"8,threads=2", 2}, /* 4 sibling pairs: 2 per L3 */
    {"3", 1},           /* 2 + 1 cores: runs of unequal length */
};

/* --vnuma=auto on the recorded EPYC 7351P (2 L3s of 2 cores per node),
 * one-to-one: the rewritten -smp has a die per L3 the vCPUs run in, and
 * the real QEMU puts vCPUs that share a host L3 in one guest die, and
 * vCPUs that do not in different dies. */
static void
test_dies(gconstpointer data)
{
  const DieCase *c = data;
  g_autofree char *xml =
      g_build_filename(g_getenv("QP_TOPOLOGIES"), "epyc-7351p.xml", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(QpHost) host = qp_host_load(xml, &error);
  g_assert_no_error(error);
  const char *argv[] = {"-smp", c->smp, "-m", "512", NULL};
  g_autoptr(QpQemuArgs) args = qp_test_parse_ok(argv);
  QpPlacementOptions opts;
  qp_placement_options_init(&opts);
  opts.mode = QP_MODE_ONE_TO_ONE;
  opts.vnuma = TRUE;
  g_autoptr(QpPlan) plan =
      qp_plan_compute(host, NULL, args->req, &opts, &error);
  qp_placement_options_clear(&opts);
  g_assert_no_error(error);
  g_assert_cmpuint(MAX(plan->vnuma_dies, 1), ==, c->dies);

  g_auto(GStrv) out =
      qp_qemu_args_rewrite(args, "qemu-system-x86_64", plan, -1, &error);
  g_assert_no_error(error);
  g_autoptr(GPtrArray) run = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GRegex) nodes = g_regex_new("host-nodes=[0-9]+", 0, 0, NULL);
  for (guint i = 1; out[i] != NULL; i++)
    g_ptr_array_add(run, g_regex_replace_literal(nodes, out[i], -1, 0,
                                                 "host-nodes=0", 0, NULL));
  g_ptr_array_add(run, NULL);
  g_autofree char *line = g_strjoinv(" ", (char **)run->pdata);
  g_test_message("QEMU args: %s", line);
  g_autofree char *want = g_strdup_printf(",dies=%u,", c->dies);
  g_assert_nonnull(strstr(line, want));

  QpTestQemuView view;
  qp_test_qemu_view((const char *const *)run->pdata, &view);
  g_test_message("QEMU: %s", view.err);
  g_assert_true(view.started);
  g_assert_cmpuint(view.maxcpus, ==, plan->n_vcpus);
  for (guint v = 0; v < view.maxcpus; v++)
    for (guint w = 0; w < view.maxcpus; w++)
      if (c->dies > 1)
        g_assert_cmpint(view.cpu_die[v] == view.cpu_die[w], ==,
                        plan_l3_of(host, plan, v) == plan_l3_of(host, plan, w));
      else
        g_assert_cmpint(view.cpu_die[v], ==, view.cpu_die[w]);
  qp_test_qemu_view_clear(&view);
}

/* The launch on this host: -smp 2,maxcpus=4 in numa mode. The host has room
 * for the boot vCPUs only; the guest still gets all four. */
static void
test_launch(void)
{
  g_autofree char *dir = qp_test_tmpdir();
  g_autofree char *fw = qp_test_firmware(dir, QP_TEST_FW_HALT);
  g_autofree char *qmp = g_build_filename(dir, "qmp.sock", NULL);
  g_autofree char *qmparg = g_strdup_printf("unix:%s,server=on,wait=off", qmp);
  g_autofree char *state = g_build_filename(dir, "state", NULL);
  g_autofree char *sd = g_strdup_printf("--state-dir=%s", state);
  g_autofree char *marker = g_path_get_basename(dir);
  g_autofree char *name = g_strdup_printf("%s,debug-threads=on", marker);
  const char *argv[] = {qp_test_binary(),
                        sd,
                        "--config=/dev/null",
                        "--mode=numa",
                        "--vnuma=auto",
                        "--",
                        qp_test_qemu(),
                        "-accel",
                        "tcg",
                        "-nodefaults",
                        "-display",
                        "none",
                        "-bios",
                        fw,
                        "-name",
                        name,
                        "-smp",
                        "2,maxcpus=4",
                        "-m",
                        "64",
                        "-qmp",
                        qmparg,
                        NULL};
  GPid pid = qp_test_spawn((char **)argv, NULL, dir);
  gboolean running = qp_test_wait_status(qmp, "running", 30000);
  g_autofree char *errpath = g_build_filename(dir, "stderr", NULL);
  g_autofree char *err = NULL;
  g_file_get_contents(errpath, &err, NULL, NULL);
  g_test_message("stderr: %s", err);
  g_assert_true(running);
  g_autoptr(JsonNode) hot = qp_test_qmp_command(qmp, "query-hotpluggable-cpus");
  g_autoptr(JsonNode) boot = qp_test_qmp_command(qmp, "query-cpus-fast");
  g_assert_nonnull(hot);
  g_assert_nonnull(boot);
  g_assert_cmpuint(json_array_get_length(json_node_get_array(hot)), ==, 4);
  g_assert_cmpuint(json_array_get_length(json_node_get_array(boot)), ==, 2);
  kill(pid, SIGTERM);
  g_assert_cmpint(qp_test_wait(pid, 20000), >=, 0);
  g_assert_true(qp_test_wait_no_process(marker, 20000));
  qp_test_rmtree(dir);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *path =
        g_strdup_printf("/vnuma/maxcpus/recorded-host/%s", cases[i].name);
    g_test_add_data_func(path, &cases[i], test_recorded_host);
  }
  for (gsize i = 0; i < G_N_ELEMENTS(die_cases); i++) {
    g_autofree char *path =
        g_strdup_printf("/vnuma/dies/epyc-7351p/%s", die_cases[i].smp);
    g_test_add_data_func(path, &die_cases[i], test_dies);
  }
  g_test_add_func("/vnuma/maxcpus/launch", test_launch);
  g_test_add_func("/vnuma/cpu-device-at-start", test_cpu_device_at_start);
  return g_test_run();
}
