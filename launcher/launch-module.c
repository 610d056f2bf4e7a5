/* The launch module the front loads for a launch (launcher/hand-over.h):
 * the launch path, linked without json-glib (and so without GObject and
 * GIO). qemu-pin's commands and plans are the full module's: handed over
 * whole. */
#include "launcher/edge.h"
#include "launcher/front/front.h"
#include "launcher/hand-over.h"

int qp_module_main(int argc, char **argv, const struct timespec *t0);

static int
hand_over_plan(const QpOptions *opts, const QpQemuArgs *args,
               gboolean plan_only, GError **error)
{
  return qp_hand_over(error);
}

static int launch_command(QpOptions *opts, int argc, char **argv,
                          GError **error);

static const QpEdge launch_edge = {hand_over_plan, launch_command, NULL};

static int
launch_command(QpOptions *opts, int argc, char **argv, GError **error)
{
  if (argc > 1 && qp_front_is_command(argv[1]))
    return qp_hand_over(error);
  return qp_edge_qemu_command(&launch_edge, opts, argc, argv, 0, error);
}

int
qp_module_main(int argc, char **argv, const struct timespec *t0)
{
  return qp_edge_main(argc, argv, t0, &launch_edge);
}
