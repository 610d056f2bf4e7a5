/* qemu-pin: the front. Linked with the C library alone, it runs QEMU
 * straight for help, probes and mode none (front.h), and otherwise loads
 * a module next to this executable in a build tree, else where it is
 * installed (QP_MODULE_DIR: relative to this executable's directory, or
 * absolute): for a launch qemu-pin-launch.so (launcher/launch-module.c),
 * which loads no json-glib, GObject or GIO; for qemu-pin's own commands
 * the full program, qemu-pin-full.so (launcher/module.c). */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "launcher/front/front.h"

#define FULL_MODULE "qemu-pin-full.so"
#define LAUNCH_MODULE "qemu-pin-launch.so"

typedef int (*ModuleMain)(int argc, char **argv, const struct timespec *t0);

/* Module NAME's path: a string of malloc(), or NULL. */
static char *
module_path(const char *name)
{
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0)
    return NULL;
  exe[n] = '\0';
  char *slash = strrchr(exe, '/');
  if (slash == NULL)
    return NULL;
  *slash = '\0';
  char *p = NULL;
  if (asprintf(&p, "%s/%s", exe, name) < 0)
    return NULL;
  if (access(p, R_OK) == 0)
    return p;
  free(p);
  int absolute = QP_MODULE_DIR[0] == '/';
  if (asprintf(&p, "%s%s" QP_MODULE_DIR "/%s", absolute ? "" : exe,
               absolute ? "" : "/", name) < 0)
    return NULL;
  return p;
}

static int
run_module(const char *name, int argc, char **argv, const struct timespec *t0)
{
  char *path = module_path(name);
  void *module = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
  ModuleMain main_of = NULL;
  if (module != NULL)
    *(void **)&main_of = dlsym(module, "qp_module_main");
  if (main_of == NULL) {
    const char *why = dlerror();
    fprintf(stderr, "qemu-pin: cannot load the rest of qemu-pin (%s): %s\n",
            path ? path : name, why ? why : "no such file");
    free(path);
    return 1;
  }
  free(path);
  return main_of(argc, argv, t0);
}

extern char **environ;

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
    /* The full program says why, and exits as it does. */
    qp_front_exec_clear(&e);
  }
  /* A drop-in, or qemu-pin with no command of its own, launches. */
  char *self = qp_front_basename(argv[0]);
  int command = self != NULL && !qp_is_qemu_name(self) && argc > 1 &&
                qp_front_is_command(argv[1]);
  free(self);
  return run_module(command ? FULL_MODULE : LAUNCH_MODULE, argc, argv, &t0);
}
