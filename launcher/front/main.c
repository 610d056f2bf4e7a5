/* qemu-pin: the launcher (docs/design.md, "The front"). Statically linked
 * (C library, glib, hwloc) where the build can, so that nothing is loaded
 * before QEMU: help, probes and mode none run QEMU straight from here,
 * before anything of glib or hwloc is touched; a launch runs here too, its
 * keeper included (launcher/launch-main.c); qemu-pin's commands, plans and
 * whatever a launch hands over run in the full program, another
 * executable (launcher/full-main.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "launcher/front/front.h"
#include "launcher/launch-main.h"
#ifdef QP_STATIC_LAUNCHER
#include "topology/base/accounts.h"
#endif

extern char **environ;

/* The full program with the caller's command line: returns only if it
 * cannot be run. */
static int
run_full(int argc, char **argv)
{
  char *path = NULL;
  qp_front_exec_full(argc, argv, &path);
  fprintf(stderr, "qemu-pin: cannot run the rest of qemu-pin (%s): %s\n",
          path != NULL ? path : "qemu-pin-full", strerror(errno));
  free(path);
  return 1;
}

int
main(int argc, char **argv)
{
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  QpFrontExec e;
  if (qp_front_decide(argc, argv, environ, &e)) {
    const char *timing = getenv("QEMU_PIN_TIMING");
    if (timing != NULL && strcmp(timing, "1") == 0) {
      struct timespec t;
      clock_gettime(CLOCK_MONOTONIC, &t);
      fprintf(stderr, "qemu-pin: timing: exec %.3f\n",
              (double)(t.tv_sec - t0.tv_sec) * 1e3 +
                  (double)(t.tv_nsec - t0.tv_nsec) / 1e6);
    }
    if (strchr(e.binary, '/') != NULL)
      execv(e.binary, e.argv);
    else
      execvp(e.binary, e.argv);
    /* The launch path says why, and exits as it does. */
    qp_front_exec_clear(&e);
  }
  /* A drop-in, or qemu-pin with no command of its own, launches. */
  char *self = qp_front_basename(argv[0]);
  int command = self != NULL && !qp_is_qemu_name(self) && argc > 1 &&
                qp_front_is_command(argv[1]);
  free(self);
  if (command)
    return run_full(argc, argv);
#ifdef QP_STATIC_LAUNCHER
  /* A static C library must not load what is built for the shared one:
   * NSS modules (accounts.h), and the iconv modules of a file name
   * encoding GLib is told of (the C locale's ASCII and UTF-8 are built
   * in). */
  qp_accounts_files_only(NULL);
  if (getenv("G_FILENAME_ENCODING") != NULL ||
      getenv("G_BROKEN_FILENAMES") != NULL)
    return run_full(argc, argv);
#endif
  return qp_launch_main(argc, argv, &t0);
}
