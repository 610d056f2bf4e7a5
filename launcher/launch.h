/* Launching QEMU with a plan in force: the ledger claim, the keeper, the
 * startup CPU set and memory policy, and exec in place (or, with
 * -daemonize, QEMU as a child whose first process must exit 0). The
 * keeper's own interface is launcher/keeper/keeper.h. */
#pragma once

#include <glib.h>

#include "launcher/options.h"
#include "launcher/qemu-args.h"
#include "topology/plan.h"

G_BEGIN_DECLS

/* Replaces this process with BINARY (ARGV[0] as given). Returns only on
 * failure, with the exit status to use (127 not found, 126 otherwise). */
int qp_exec(const char *binary, char **argv, GError **error);

/* What qemu-pin makes of QEMU's ARGV (the binary excluded) under OPTS:
 * NULL without an error in mode none, where QEMU runs as it is and its
 * command line is not read; else the parsed command line (passthrough set
 * for help, version and probes), or NULL with the one-line refusal. */
QpQemuArgs *qp_launch_read(const QpOptions *opts, guint argc, char **argv,
                           GError **error);

/* Launches ARGS under OPTS. Returns the exit status for main() when it
 * returns at all (exec in place does not return on success). */
int qp_launch(QpOptions *opts, const char *binary, const char *argv0,
              QpQemuArgs *args);

/* Prints the plan (JSON, or a table with --human) without launching. */
int qp_dry_run(QpOptions *opts, QpQemuArgs *args);

/* The same in mode none, where QEMU's command line is not read: only the
 * mode and why (see docs/plan-schema.md). */
int qp_dry_run_none(QpOptions *opts);

G_END_DECLS
