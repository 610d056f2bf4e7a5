/* qemu-pin refuses a command line only where QEMU 7.2 refuses it too. Each
 * row of tests/common/qemu-refusals.c is run through the real QEMU, which
 * must refuse it with the message the row holds, and through qemu-pin's
 * parser, which must refuse it in one line with the row's words. The lines
 * QEMU accepts (some with a warning of its own) must parse, and qemu-pin
 * must read the vCPUs, memory and guest nodes QEMU reports over QMP. */
#include <string.h>

#include "launcher/qemu/args.h"
#include "tests/common/qemu-refusals.h"
#include "tests/common/qp-test.h"

static void
test_refused(gconstpointer data)
{
  const QpQemuRefusal *row = data;
  g_auto(GStrv) args_in = qp_qemu_refusal_args(row);
  QpTestQemuView view;
  qp_test_qemu_view((const char *const *)args_in, &view);
  g_test_message("QEMU: %s", view.err);
  g_assert_false(view.started);
  g_assert_cmpint(view.status, ==,
                  row->qemu_signal ? 128 + row->qemu_signal : 1);
  g_assert_nonnull(strstr(view.err, row->qemu_says));
  qp_test_qemu_view_clear(&view);

  g_autoptr(GError) error = NULL;
  g_autoptr(QpQemuArgs) args =
      qp_qemu_args_parse(g_strv_length(args_in), args_in, &error);
  g_assert_null(args);
  g_assert_nonnull(error);
  g_test_message("qemu-pin: %s", error->message);
  g_assert_null(strchr(error->message, '\n'));
  g_assert_true(qp_qemu_refusal_matches(row, error->message));
  g_assert_true(qp_qemu_refusal_find(error->message) != NULL);
}

/* Lines QEMU 7.2 accepts, some with a warning of its own, and lines of
 * later QEMUs. LATER_SAYS: the refusal of a QEMU that does not take the
 * line: a later one that no longer does (9.0 removed -smp's zeros and -m's
 * hexadecimal), or 7.2 for what came after it (modules, 9.1); qemu-pin
 * takes it either way, and that QEMU's own message reaches the caller at
 * launch. */
typedef struct {
  const char *name;
  const char *args[16];
  const char *later_says;
} Accepted;

#define SMP_ZERO_REMOVED                                                       \
  "Invalid CPU topology: CPU topology parameters must be greater than zero"

static const Accepted accepted[] = {
    {"smp/zero", {"-smp", "0", NULL}, SMP_ZERO_REMOVED},
    {"smp/zero-cores", {"-smp", "4,sockets=2,cores=0", NULL}, SMP_ZERO_REMOVED},
    {"smp/machine-zero",
     {"-machine", "q35,smp.cpus=0", NULL},
     SMP_ZERO_REMOVED},
    {"smp/dies", {"-smp", "4,dies=2", NULL}},
    {"smp/modules",
     {"-smp", "8,sockets=1,modules=2,cores=4", NULL},
     "Parameter 'smp.modules' is unexpected"},
    {"smp/modules-filled",
     {"-machine", "q35,smp.cpus=8,smp.sockets=2,smp.modules=2", NULL},
     "Parameter 'smp.modules' is unexpected"},
    {"smp/modules-numa",
     {"-smp", "4,modules=2,cores=2", "-m", "128", "-object",
      "memory-backend-ram,id=m0,size=64M", "-object",
      "memory-backend-ram,id=m1,size=64M", "-numa", "node,memdev=m0,cpus=0-1",
      "-numa", "node,memdev=m1,cpus=2-3", NULL},
     "Parameter 'smp.modules' is unexpected"},
    /* -smp and -machine smp.* are one set of items, merged key by key in
     * command-line order; -m is merged last over -machine memory.*. */
    {"smp/machine-cpus-then-smp-sockets",
     {"-machine", "smp.cpus=4", "-smp", "sockets=2", NULL}},
    {"smp/smp-then-machine-maxcpus",
     {"-smp", "2", "-machine", "smp.maxcpus=4", NULL}},
    {"smp/smp-machine-smp",
     {"-smp", "2", "-machine", "smp.cpus=4", "-smp", "cores=2", NULL}},
    /* (5.0 and earlier make no guest node for hot-pluggable memory.) */
    {"m/machine-size-then-m-maxmem",
     {"-M", "pc-i440fx-5.0", "-machine", "memory.size=256M", "-m", "maxmem=1G",
      NULL}},
    {"m/m-size-then-machine-size",
     {"-m", "512", "-machine", "memory.size=256M", NULL}},
    /* vCPUs plugged at start with -device (libvirt's hot-pluggable vCPUs
     * enabled at boot) run from the start, in either syntax. */
    {"smp/cpu-device-at-start",
     {"-smp", "1,maxcpus=2", "-device",
      "qemu64-x86_64-cpu,socket-id=0,core-id=1,thread-id=0", NULL}},
    {"smp/cpu-devices-at-start-json",
     {"-smp", "1,maxcpus=4", "-device",
      "{\"driver\":\"qemu64-x86_64-cpu\",\"socket-id\":0,\"core-id\":3,"
      "\"thread-id\":0}",
      "-device", "driver=qemu64-x86_64-cpu,socket-id=0,core-id=1,thread-id=0",
      NULL}},
    /* ... in the slot their ids name, above a hole (cpu-indexes 0 and 3),
     * by apic-id where the topology's counts are no powers of 2 (apic-id 5
     * is socket 1, core 1: cpu-index 4), with dies, and a thread. */
    {"smp/cpu-device-after-hole",
     {"-smp", "1,maxcpus=4", "-device",
      "qemu64-x86_64-cpu,socket-id=0,core-id=3,thread-id=0", NULL}},
    {"smp/cpu-device-apic-id",
     {"-smp", "1,maxcpus=6,sockets=2,cores=3", "-device",
      "qemu64-x86_64-cpu,apic-id=5", NULL}},
    {"smp/cpu-device-die",
     {"-smp", "1,maxcpus=8,sockets=2,dies=2,cores=2", "-device",
      "qemu64-x86_64-cpu,socket-id=1,die-id=0,core-id=1,thread-id=0", NULL}},
    {"smp/cpu-device-thread",
     {"-smp", "2,maxcpus=6,threads=2", "-device",
      "qemu64-x86_64-cpu,socket-id=0,core-id=2,thread-id=1", NULL}},
    {"m/zero", {"-m", "0", NULL}},
    {"m/empty", {"-m", "", NULL}},
    {"m/hex", {"-m", "0x10", NULL}, "Parameter 'memory.size' expects size"},
    {"m/fraction", {"-m", "1.5G", NULL}},
    {"m/zero-fraction", {"-m", "1024.0", NULL}},
    {"m/dot-then-suffix", {"-m", "1.G", NULL}},
    {"m/size-zero-fraction", {"-m", "size=64.00", NULL}},
    {"numa/vcpu-in-no-node",
     {"-smp", "2", "-m", "128", "-object", "memory-backend-ram,id=m0,size=64M",
      "-object", "memory-backend-ram,id=m1,size=64M", "-numa",
      "node,memdev=m0,cpus=0", "-numa", "node,memdev=m1", NULL}},
    {"object/preferred-host-nodes",
     {"-object",
      "memory-backend-ram,id=m0,size=64M,policy=preferred,host-nodes=0", NULL}},
    /* hugetlbsize without hugetlb: a power of 2 is never used. */
    {"object/memfd-hugetlbsize-without-hugetlb",
     {"-object", "memory-backend-memfd,id=m0,size=64M,hugetlbsize=4M", NULL}},
};

static void
test_accepted(gconstpointer data)
{
  const Accepted *row = data;
  QpTestQemuView view;
  qp_test_qemu_view(row->args, &view);
  g_test_message("QEMU: %s", view.err);

  g_autoptr(GError) error = NULL;
  guint argc = g_strv_length((char **)row->args);
  g_autoptr(QpQemuArgs) args =
      qp_qemu_args_parse(argc, (char **)row->args, &error);
  g_assert_no_error(error);
  if (!view.started && row->later_says != NULL) {
    g_assert_cmpint(view.status, ==, 1);
    g_assert_nonnull(strstr(view.err, row->later_says));
    qp_test_qemu_view_clear(&view);
    return;
  }
  g_assert_true(view.started);
  g_assert_cmpuint(args->req->vcpus, ==, view.vcpus);
  g_auto(hwloc_bitmap_t) boot = qp_request_boot_set(args->req);
  g_autofree char *boot_list = qp_list_format(boot);
  g_assert_cmpstr(boot_list, ==, view.boot);
  g_assert_cmpuint(args->req->maxcpus, ==, view.maxcpus);
  g_assert_cmpuint(args->req->mem_mib, ==, view.ram_mib);
  g_assert_cmpuint(args->req->n_gnodes, ==, view.n_nodes);
  qp_test_qemu_view_clear(&view);
}

/* A memfd backend's hugetlbsize that is a power of 2 but no hugepage size
 * of the host (4 MiB: x86 has 2 MiB and 1 GiB pages): QEMU refuses it
 * (memfd_create() fails, ENODEV), and so does qemu-pin before planning,
 * quoting QEMU's message, the size and the host's sizes; it never plans a
 * claim in a page size the host does not have. The sizes the host has,
 * and hugetlbsize without hugetlb, pass. */
static void
test_memfd_page_size_not_on_host(void)
{
  if (g_file_test("/sys/kernel/mm/hugepages/hugepages-4096kB",
                  G_FILE_TEST_EXISTS)) {
    g_test_skip("this host has 4 MiB hugepages");
    return;
  }
  static const struct {
    const char *object;
    const char *qemu_says;
  } rows[] = {
      {"memory-backend-memfd,id=m0,size=64M,hugetlb=on,hugetlbsize=4M",
       "failed to create memfd with flags 0x58000007: No such device"},
      {"memory-backend-memfd,id=m0,size=64M,hugetlb=on,hugetlbsize=4M,"
       "seal=off",
       "failed to create memfd with flags 0x58000005: No such device"},
  };
  g_autofree char *xml =
      g_build_filename(g_getenv("QP_TOPOLOGIES"), "intel-2s-smt.xml", NULL);
  g_autofree char *topology = g_strdup_printf("--topology=%s", xml);
  for (gsize i = 0; i < G_N_ELEMENTS(rows); i++) {
    const char *args[] = {"-object", rows[i].object, "-machine",
                          "memory-backend=m0", NULL};
    QpTestQemuView view;
    qp_test_qemu_view(args, &view);
    g_test_message("QEMU: %s", view.err);
    g_assert_false(view.started);
    g_assert_nonnull(strstr(view.err, rows[i].qemu_says));
    qp_test_qemu_view_clear(&view);

    /* On a recorded host with 2 MiB and 1 GiB pools, and on this one. */
    g_autofree char *want = g_strdup_printf(
        "qemu-pin: -object memory backend 'm0': hugetlbsize 4096 KiB is not "
        "a hugepage size of this host: expected 2048 KiB, 1048576 KiB (QEMU: "
        "%s)\n",
        rows[i].qemu_says);
    /* plan on the recorded host, plan on this one, and rebalance, which
     * makes no room for it. */
    const struct {
      const char *command, *option, *more;
      gboolean recorded;
    } ways[] = {{"plan", topology, "--mode=auto", TRUE},
                {"plan", "-v", "--mode=auto", FALSE},
                {"rebalance", topology, "--dry-run", TRUE}};
    for (gsize w = 0; w < G_N_ELEMENTS(ways); w++) {
      char *argv[] = {(char *)qp_test_binary(),
                      (char *)ways[w].command,
                      (char *)ways[w].option,
                      (char *)ways[w].more,
                      "--",
                      (char *)qp_test_qemu(),
                      "-m",
                      "64",
                      "-object",
                      (char *)rows[i].object,
                      "-machine",
                      "memory-backend=m0",
                      NULL};
      QpTestRun r;
      qp_test_run(argv, NULL, &r);
      g_test_message("qemu-pin %s%s: %d %s", ways[w].command,
                     ways[w].recorded ? " (recorded)" : "", r.status, r.err);
      g_assert_cmpint(r.status, ==, 1);
      g_assert_cmpstr(r.out, ==, "");
      if (ways[w].recorded)
        g_assert_cmpstr(r.err, ==, want);
      g_assert_nonnull(strstr(r.err, "hugetlbsize 4096 KiB is not a "
                                     "hugepage size of this host"));
      g_assert_nonnull(strstr(r.err, rows[i].qemu_says));
      qp_test_run_clear(&r);
    }
  }
  /* The sizes the recorded host has are planned in that size (its pools:
   * 1024 pages of 2 MiB, 4 of 1 GiB per node); hugetlbsize without hugetlb
   * is never used. */
  static const char *const pass[][3] = {
      {"memory-backend-memfd,id=m0,size=64M,hugetlb=on,hugetlbsize=2M", "64",
       "2048"},
      {"memory-backend-memfd,id=m0,size=1G,hugetlb=on,hugetlbsize=1G", "1G",
       "1048576"},
      {"memory-backend-memfd,id=m0,size=64M,hugetlbsize=4M", "64", NULL}};
  for (gsize i = 0; i < G_N_ELEMENTS(pass); i++) {
    char *argv[] = {(char *)qp_test_binary(),
                    "plan",
                    topology,
                    "--",
                    (char *)qp_test_qemu(),
                    "-m",
                    (char *)pass[i][1],
                    "-object",
                    (char *)pass[i][0],
                    "-machine",
                    "memory-backend=m0",
                    NULL};
    QpTestRun r;
    qp_test_run(argv, NULL, &r);
    g_test_message("qemu-pin plan %s: %d %s", pass[i][0], r.status, r.err);
    g_assert_cmpint(r.status, ==, 0);
    g_autoptr(JsonParser) p = json_parser_new();
    g_assert_true(json_parser_load_from_data(p, r.out, -1, NULL));
    JsonObject *plan = json_node_get_object(json_parser_get_root(p));
    g_autofree char *text = json_to_string(json_parser_get_root(p), FALSE);
    g_test_message("%s", text);
    if (pass[i][2] != NULL) {
      g_autofree char *page = g_strdup_printf("\"page-kib\":%s", pass[i][2]);
      g_assert_nonnull(strstr(text, page));
    } else {
      g_assert_nonnull(strstr(text, "\"page-kib\":0,"));
    }
    g_assert_true(json_object_has_member(plan, "mode"));
    qp_test_run_clear(&r);
  }
}

/* The vCPU limit of each x86 machine type, as the real QEMU states it
 * (-smp 99999: "The max CPUs supported by machine 'T' is N"): qemu-pin
 * takes N vCPUs, and refuses N + 1 where the type names its version. The
 * aliases q35 and pc name the newest type of whichever QEMU runs (q35 is
 * 288 vCPUs in 7.2, 4096 in 10.0): qemu-pin, not knowing which, never
 * refuses what that QEMU takes. Types this QEMU does not have (pc-q35-9.0
 * in 7.2) are left out: QEMU refuses them as unknown. */
static void
test_machine_max_cpus(void)
{
  static const char *const types[] = {
      "q35",        "pc",         "pc-q35-7.2",  "pc-q35-8.0",    "pc-q35-8.1",
      "pc-q35-8.2", "pc-q35-9.0", "pc-q35-10.0", "pc-i440fx-7.2", "microvm",
  };
  guint checked = 0;
  for (gsize i = 0; i < G_N_ELEMENTS(types); i++) {
    const char *in[] = {"-machine", types[i], "-smp", "99999", NULL};
    QpTestQemuView view;
    qp_test_qemu_view(in, &view);
    g_assert_false(view.started);
    const char *says = strstr(view.err, "The max CPUs supported by machine '");
    if (says == NULL) {
      g_assert_nonnull(strstr(view.err, "unsupported machine type"));
      g_assert_cmpstr(types[i], !=, "q35");
      g_assert_cmpstr(types[i], !=, "pc");
      qp_test_qemu_view_clear(&view);
      continue;
    }
    const char *is = strstr(says, "' is ");
    g_assert_nonnull(is);
    guint64 max = g_ascii_strtoull(is + 5, NULL, 10);
    g_assert_cmpuint(max, >, 1);
    g_test_message("QEMU: %s: %" G_GUINT64_FORMAT " vCPUs", types[i], max);
    qp_test_qemu_view_clear(&view);

    g_autofree char *n = g_strdup_printf("%" G_GUINT64_FORMAT, max);
    const char *at_max[] = {"-machine", types[i], "-smp", n, NULL};
    g_autoptr(GError) error = NULL;
    g_autoptr(QpQemuArgs) args = qp_qemu_args_parse(4, (char **)at_max, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(args->req->maxcpus, ==, max);

    if (strcmp(types[i], "q35") == 0 || strcmp(types[i], "pc") == 0)
      continue;
    g_autofree char *over = g_strdup_printf("%" G_GUINT64_FORMAT, max + 1);
    const char *above[] = {"-machine", types[i], "-smp", over, NULL};
    g_autoptr(GError) refused = NULL;
    g_autoptr(QpQemuArgs) none =
        qp_qemu_args_parse(4, (char **)above, &refused);
    g_assert_null(none);
    g_autofree char *words =
        g_strdup_printf("exceed the maximum of %" G_GUINT64_FORMAT, max);
    g_assert_nonnull(strstr(refused->message, words));
    checked++;
  }
  g_assert_cmpuint(checked, >=, 3);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  for (gsize i = 0; i < qp_n_qemu_refusals; i++) {
    g_autofree char *path =
        g_strdup_printf("/refusals/%s", qp_qemu_refusals[i].name);
    g_test_add_data_func(path, &qp_qemu_refusals[i], test_refused);
  }
  for (gsize i = 0; i < G_N_ELEMENTS(accepted); i++) {
    g_autofree char *path = g_strdup_printf("/accepted/%s", accepted[i].name);
    g_test_add_data_func(path, &accepted[i], test_accepted);
  }
  g_test_add_func("/refusals/memfd-page-size-not-on-host",
                  test_memfd_page_size_not_on_host);
  g_test_add_func("/refusals/machine-max-cpus", test_machine_max_cpus);
  return g_test_run();
}
