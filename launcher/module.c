/* The full program as a module the front loads (launcher/front/main.c):
 * all of qemu-pin but the front, with the libraries it needs; and the
 * keeper's entry, which the keeper of a launch the launch module made
 * loads once QEMU runs (launcher/keeper/spawn.c). */
#include <glib.h>

#include "launcher/commands.h"
#include "launcher/keeper/keeper.h"
#include "launcher/log.h"

int qp_module_main(int argc, char **argv, const struct timespec *t0);
G_GNUC_NORETURN void qp_keeper_module_main(const QpKeeperConfig *cfg);

int
qp_module_main(int argc, char **argv, const struct timespec *t0)
{
  return qp_main(argc, argv, t0);
}

void
qp_keeper_module_main(const QpKeeperConfig *cfg)
{
  /* This module's log is not the launcher's: set as the launcher's was. */
  qp_log_init(cfg->verbose);
  qp_log_set_vm(cfg->claim->name);
  qp_keeper_main(cfg);
}
