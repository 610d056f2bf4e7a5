/* The command line edge: which of qemu-pin's faces was invoked (drop-in
 * QEMU binary, launcher, plan, topology, status) and the exit status. */
#pragma once

#include <glib.h>
#include <time.h>

#include "launcher/options.h"

G_BEGIN_DECLS

/* The full program; T0 the front's start (CLOCK_MONOTONIC), or NULL. */
int qp_main(int argc, char **argv, const struct timespec *t0);

/* topology, status and rebalance refuse what the command line gives them
 * for another command (after qp_options_parse_cli(), before the
 * environment's twins, which are for every command): topology reads the
 * host only; status has no --human, launches nothing (--dry-run) and
 * plans nothing (of the placement options it takes the reserve only);
 * rebalance prints its moves, none of status's outputs. */
gboolean qp_command_options_only(const char *cmd, const QpOptions *opts,
                                 GError **error);

G_END_DECLS
