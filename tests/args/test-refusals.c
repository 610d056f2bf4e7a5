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

/* Lines QEMU 7.2 accepts, some with a warning of its own. */
typedef struct {
  const char *name;
  const char *args[16];
} Accepted;

static const Accepted accepted[] = {
    {"smp/zero", {"-smp", "0", NULL}},
    {"smp/zero-cores", {"-smp", "4,sockets=2,cores=0", NULL}},
    {"smp/machine-zero", {"-machine", "q35,smp.cpus=0", NULL}},
    {"smp/dies", {"-smp", "4,dies=2", NULL}},
    {"m/zero", {"-m", "0", NULL}},
    {"m/empty", {"-m", "", NULL}},
    {"m/hex", {"-m", "0x10", NULL}},
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
};

static void
test_accepted(gconstpointer data)
{
  const Accepted *row = data;
  QpTestQemuView view;
  qp_test_qemu_view(row->args, &view);
  g_test_message("QEMU: %s", view.err);
  g_assert_true(view.started);

  g_autoptr(GError) error = NULL;
  guint argc = g_strv_length((char **)row->args);
  g_autoptr(QpQemuArgs) args =
      qp_qemu_args_parse(argc, (char **)row->args, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(args->req->vcpus, ==, view.vcpus);
  g_assert_cmpuint(args->req->maxcpus, ==, view.maxcpus);
  g_assert_cmpuint(args->req->mem_mib, ==, view.ram_mib);
  g_assert_cmpuint(args->req->n_gnodes, ==, view.n_nodes);
  qp_test_qemu_view_clear(&view);
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
  return g_test_run();
}
