/* The way from the launch path to the full program (hand-over.h). */
#include "launcher/hand-over.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "launcher/front/front.h"
#include "qp-error.h"

static int saved_argc;
static char **saved_argv;

void
qp_hand_over_init(int argc, char **argv, const struct timespec *t0)
{
  saved_argc = argc;
  saved_argv = argv;
}

int
qp_hand_over(GError **error)
{
  /* What this process wrote on its way here goes out before the exec. */
  fflush(NULL);
  char *path = NULL;
  qp_front_exec_full(saved_argc, saved_argv, &path);
  int errsv = errno;
  g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
              "cannot run the rest of qemu-pin (%s): %s",
              path != NULL ? path : "qemu-pin-full", g_strerror(errsv));
  free(path);
  return -1;
}
