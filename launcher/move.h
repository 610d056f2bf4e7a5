/* `qemu-pin move VM --to-nodes=NODELIST [--rate=MIB] [--state-dir=DIR]
 * [--json]`: finds the VM in the ledger, checks the nodes against the host,
 * and asks the VM's keeper to move it (launcher/keeper/move.c); prints
 * the keeper's answer. */
#pragma once

#include <glib.h>

#include "launcher/options.h"
#include "topology/base/jvalue.h"
#include "topology/ledger/claims.h"

G_BEGIN_DECLS

/* Pages moved per second unless --rate says: a running guest keeps
 * running (a node's memory bandwidth is tens of GiB/s). */
#define QP_MOVE_DEFAULT_RATE_MIB 512

/* Asks VM's keeper to move it to TO_NODES (a node list of the host) at
 * RATE_MIB MiB/s of pages (0: no limit), and waits for the move to end:
 * the keeper's answer (one JSON object: vm, name, from, to, moved-mib,
 * on-destination-permille, binding, binding-moved, moved-at, mib), or NULL
 * with the one-line refusal or failure: QP_LAUNCH_ERROR_CALLER_PLACED when
 * the keeper refused because the caller placed the VM itself (its answer's
 * code), else QP_LAUNCH_ERROR_FAILED. `move` and `rebalance` both move
 * this way. */
QpJv *qp_move_ask(const QpClaim *vm, const char *to_nodes, guint rate_mib,
                  GError **error);

/* Prints the keeper's answer O: as JSON with OPTS->json, else one line. */
void qp_move_print_answer(const QpOptions *opts, const QpJv *o);

/* The command; ARGV[0] is "move". Returns the exit status, or -1 with
 * ERROR. */
int qp_cmd_move(QpOptions *opts, int argc, char **argv, GError **error);

G_END_DECLS
