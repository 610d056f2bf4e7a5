/* The full program as a module the front loads (launcher/front/main.c):
 * all of qemu-pin but the front, with the libraries it needs. */
#include <glib.h>

#include "launcher/commands.h"

int qp_module_main(int argc, char **argv, const struct timespec *t0);

int
qp_module_main(int argc, char **argv, const struct timespec *t0)
{
  return qp_main(argc, argv, t0);
}
