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
#include "launcher/qemu/args.h"
#include "topology/host/host.h"
#include "topology/ledger/claims.h"
#include "topology/plan/rebalance.h"

G_BEGIN_DECLS

/* A VM moved less than this ago stays where it is: numad waits minutes
 * between moves of one process; moving again at once only costs. */
#define QP_REBALANCE_COOLDOWN_S 600

/* The moves a rebalance would make now on HOST for CLAIMS, the ledger's
 * live records (which VMs may move: what their records say, "caller-placed"
 * never; their keepers refuse the rest), to make room for REQ (NULL: bring
 * spanning VMs back to one node too, unless ROOM_ONLY: what --make-room
 * moves), with OPTS's placement options. REFUSED and DECLINED (of char*,
 * may be NULL): ids of VMs whose keepers refused a move because the caller
 * placed them, and for what their records do not say (the settings they
 * were started with, no room there under them), kept where they are.
 * `rebalance`, `status` and --make-room plan with it. */
QpRebalance *qp_rebalance_live(const QpOptions *opts, const QpHost *host,
                               const QpClaims *claims, const QpRequest *req,
                               gint64 cooldown_s, gboolean room_only,
                               const GPtrArray *refused,
                               const GPtrArray *declined, GError **error);

/* --make-room, before a launch takes its claim: when the VM of ARGS would
 * span more nodes than after some moves, or fit only after them, makes
 * those moves by the VMs' keepers (the ledger of STATE_DIR on HOST). Says
 * nothing unless -v; a keeper that refuses a move (the caller placed its
 * VM, or what its record does not say) makes it plan again without that VM
 * (as `rebalance`); any other move that
 * fails is one warning, and the launch goes on with the plan the host
 * allows. TRUE when a move was made (the host's free memory then changed:
 * read it again). */
gboolean qp_make_room(const QpOptions *opts, const QpQemuArgs *args,
                      const QpHost *host, const char *state_dir);

/* The command; ARGV[0] is "rebalance". Returns the exit status, or -1 with
 * ERROR. */
int qp_cmd_rebalance(QpOptions *opts, int argc, char **argv, GError **error);

G_END_DECLS
