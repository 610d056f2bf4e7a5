/* The launch path (launch-main.h): the edge with what a launch needs,
 * and the hand-over to the full program for the rest. */
#include "launcher/launch-main.h"

#include "launcher/edge.h"
#include "launcher/front/front.h"
#include "launcher/hand-over.h"

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
qp_launch_main(int argc, char **argv, const struct timespec *t0)
{
  return qp_edge_main(argc, argv, t0, &launch_edge);
}
