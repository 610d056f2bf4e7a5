/* Launching QEMU with a plan in force: the ledger claim, the keeper, the
 * startup CPU set and memory policy, and exec in place (or, with
 * -daemonize, QEMU as a child whose first process must exit 0). The
 * keeper's own interface is launcher/keeper/keeper.h. */
#pragma once

#include <glib.h>

#include "launcher/options.h"
#include "launcher/qemu/args.h"
#include "topology/host/host.h"
#include "topology/ledger/claims.h"
#include "topology/plan/plan.h"

G_BEGIN_DECLS

/* Replaces this process with BINARY (ARGV[0] as given). Returns only on
 * failure, with ERROR set: QP_LAUNCH_ERROR_NO_BINARY when it does not
 * exist, QP_LAUNCH_ERROR_EXEC otherwise. */
void qp_exec(const char *binary, char **argv, GError **error);

/* What qemu-pin makes of QEMU's ARGV (the binary excluded) under OPTS:
 * NULL without an error in mode none, where QEMU runs as it is and its
 * command line is not read; else the parsed command line (passthrough set
 * for help, version and probes), or NULL with the one-line refusal. */
QpQemuArgs *qp_launch_read(const QpOptions *opts, guint argc, char **argv,
                           GError **error);

/* Launches ARGS under OPTS: claims the plan's room in the ledger, forks
 * the keeper and execs QEMU in place, which does not return. With
 * -daemonize, returns QEMU's exit status when QEMU refused to start, else
 * 0 once the daemon runs with the plan in force. -1 with ERROR when the
 * launch failed (nothing is left claimed, no QEMU left running). */
typedef gboolean (*QpMakeRoom)(const QpOptions *opts, const QpQemuArgs *args,
                               const QpHost *host, const char *dir);
/* MAKE_ROOM (--make-room, the full module's qp_make_room(); NULL in the
 * launch module, which hands such a launch over) runs before the claim
 * when OPTS ask for it. */
int qp_launch(QpOptions *opts, const char *binary, const char *argv0,
              QpQemuArgs *args, QpMakeRoom make_room, GError **error);

/* The ledger's state directory under OPTS: --state-dir, else the host-wide
 * one, or this user's when the host-wide one is not usable (then said in one
 * warning line). */
char *qp_launch_state_dir(const QpOptions *opts);

/* The plan for ARGS under OPTS against the ledger's live records, without
 * claiming anything (`qemu-pin plan`, --dry-run); the host planned on in
 * HOST_OUT. With RUNNING (`plan`), a record of the VM that ARGS name
 * (-uuid, -name) is left out, as if that VM were not running, and kept in
 * the plan's `ignored`; a launch and --dry-run count every record. What
 * reading ARGS found is said on the way; the plan's own warnings are the
 * caller's to show. */
QpPlan *qp_launch_plan(const QpOptions *opts, const QpQemuArgs *args,
                       gboolean running, QpHost **host_out, GError **error);

/* Marks PLAN as made for a running VM, as `plan` says it: OWN, the VM's
 * record qp_launch_read_ledger() left out (taken; NULL: none), kept in the
 * plan's `ignored` with BY, what matched. */
void qp_launch_plan_ignores(QpPlan *plan, QpClaim *own, const char *by);

/* What qp_launch_plan() plans on, without the plan: the host (HOST_OUT)
 * and the ledger's live records (returned), with RUNNING the record of the
 * VM that ARGS name taken out into OWN_OUT (NULL when there is none; BY_OUT
 * says what matched, as qp_claims_take_vm()). */
QpClaims *qp_launch_read_ledger(const QpOptions *opts, const QpQemuArgs *args,
                                gboolean running, QpHost **host_out,
                                QpClaim **own_out, const char **by_out,
                                GError **error);

/* Says what reading ARGS found (its warnings and notes), as a plan does. */
void qp_launch_say_read(const QpQemuArgs *args);

G_END_DECLS
