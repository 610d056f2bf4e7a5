/* `qemu-pin rebalance [--dry-run] [--json] [--cooldown=SECONDS]
 * [--state-dir=DIR] [OPTIONS] [-- QEMU_BINARY QEMU_ARGS...]`: plans which
 * running VMs to move so that spanning VMs come back to one node and, with
 * a command line, that VM fits on the fewest nodes its mode allows
 * (topology/plan/rebalance.h); prints the moves and that VM's plan after
 * them, and without --dry-run makes them, in order, by each VM's keeper as
 * `qemu-pin move` does. It launches nothing. */
#pragma once

#include <glib.h>

#include "launcher/options.h"

G_BEGIN_DECLS

/* The command; ARGV[0] is "rebalance". Returns the exit status, or -1 with
 * ERROR. */
int qp_cmd_rebalance(QpOptions *opts, int argc, char **argv, GError **error);

G_END_DECLS
