/* qemu-pin-full: the full program (launcher/front/front.h), which the
 * launcher runs for qemu-pin's commands, plans and the launches it hands
 * over, with the caller's argv and its own path (QP_FULL_MARK). Everything
 * but the launcher's front and launch path is here, with the shared
 * libraries it needs. */
#include <string.h>
#include <time.h>

#include "launcher/commands.h"
#include "launcher/front/front.h"

int
main(int argc, char **argv)
{
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  /* argv[0] QP_FULL_MARK LAUNCHER ARGS...: the caller's argv[0] ARGS...,
   * with qemu-pin being the launcher, not this program. */
  if (argc >= 3 && strcmp(argv[1], QP_FULL_MARK) == 0) {
    qp_front_set_self(argv[2]);
    argv[2] = argv[0];
    argv += 2;
    argc -= 2;
  }
  return qp_main(argc, argv, &t0);
}
