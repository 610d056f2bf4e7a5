/* `qemu-pin move VM --to-nodes=NODELIST [--rate=MIB] [--state-dir=DIR]
 * [--json]`: finds the VM in the ledger, checks the nodes against the host,
 * and asks the VM's keeper to move it (launcher/keeper/move.c); prints
 * the keeper's answer. */
#pragma once

#include <glib.h>

#include "launcher/options.h"

G_BEGIN_DECLS

/* The command; ARGV[0] is "move". Returns the exit status, or -1 with
 * ERROR. */
int qp_cmd_move(QpOptions *opts, int argc, char **argv, GError **error);

G_END_DECLS
