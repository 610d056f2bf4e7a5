/* The way from the launch module to the full one (hand-over.h). */
#include "launcher/hand-over.h"

#include <dlfcn.h>
#include <string.h>

#include "qp-error.h"

static int saved_argc;
static char **saved_argv;
static const struct timespec *saved_t0;

void
qp_hand_over_init(int argc, char **argv, const struct timespec *t0)
{
  saved_argc = argc;
  saved_argv = argv;
  saved_t0 = t0;
}

/* The full module's path: next to the module this code is in (a new
 * string), or NULL when that cannot be told. */
static char *
full_module_path(void)
{
  Dl_info info;
  if (dladdr((void *)full_module_path, &info) == 0 || info.dli_fname == NULL ||
      strchr(info.dli_fname, '/') == NULL)
    return NULL;
  g_autofree char *dir = g_path_get_dirname(info.dli_fname);
  return g_build_filename(dir, QP_FULL_MODULE, NULL);
}

typedef int (*ModuleMain)(int argc, char **argv, const struct timespec *t0);

int
qp_hand_over(GError **error)
{
  g_autofree char *path = full_module_path();
  void *module = path != NULL ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
  ModuleMain main_of = NULL;
  if (module != NULL)
    *(void **)&main_of = dlsym(module, "qp_module_main");
  if (main_of == NULL) {
    const char *why = dlerror();
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "cannot load the rest of qemu-pin (%s): %s",
                path != NULL ? path : QP_FULL_MODULE,
                why != NULL ? why : "no such file");
    return -1;
  }
  return main_of(saved_argc, saved_argv, saved_t0);
}
