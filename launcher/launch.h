/* Launching QEMU with a plan in force: the ledger claim, the keeper, the
 * startup CPU set and memory policy, and exec in place (or, with
 * -daemonize, QEMU as a child whose first process must exit 0). */
#pragma once

#include <glib.h>
#include <hwloc.h>

#include "launcher/keeper/caller-pinning.h"
#include "launcher/options.h"
#include "launcher/qemu-args.h"
#include "topology/ledger.h"
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

/* CPU affinity of a thread, as hwloc bitmaps. */
gboolean qp_set_affinity(int tid, hwloc_const_bitmap_t set, GError **error);
hwloc_bitmap_t qp_get_affinity(int tid, GError **error);

/* What the keeper needs, set up by the launcher before the fork. */
typedef struct {
  const QpPlan *plan;
  const QpCallerHost *host; /* usable CPUs, cores and nodes of the host */
  const char *state_dir;    /* ledger directory (reopened by the keeper) */
  const QpClaim *claim;     /* the record this VM holds: the keeper adopts it */
  int qmp_fd;               /* our end of the private monitor */
  guint64 qemu_end_ino;     /* inode of QEMU's end: finds a daemon by its fds */
  int qemu_pid;             /* the process that is or becomes QEMU; 0 unknown */
  gboolean daemonize;
  gboolean send_cont; /* no -S and no -incoming from the caller */
  int status_fd;      /* -daemonize: "ok\n" or a line of error; else -1 */
  guint qmp_timeout_ms;
  guint start_timeout_ms;
  int verbose;
  /* Memory may be plugged or resized while the VM runs (-m maxmem, or a
   * virtio-mem device): the keeper watches it and claims what is added,
   * on the host TOPOLOGY (NULL: live) with the reserves of PLACEMENT. */
  gboolean mem_hotplug;
  const char *topology;
  const QpPlacementOptions *placement;
} QpKeeperConfig;

/* The keeper's life: apply the plan, resume, hold the claim until QEMU
 * exits, then release it. Never returns. */
G_GNUC_NORETURN void qp_keeper_main(const QpKeeperConfig *cfg);

G_END_DECLS
