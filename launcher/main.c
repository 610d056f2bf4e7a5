/* qemu-pin: see launcher/commands.c. */
#include <glib.h>

#include "launcher/commands.h"

int
main(int argc, char **argv)
{
  return qp_main(argc, argv);
}
