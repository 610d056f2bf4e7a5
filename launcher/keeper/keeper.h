/* The keeper: a detached process per VM, forked by the launcher inside the
 * claim's critical section, that applies the plan to QEMU's threads over a
 * private monitor, resumes the guest, holds the VM's claim while QEMU runs
 * and releases it when QEMU exits. */
#pragma once

#include <glib.h>

#include "launcher/keeper/caller-pinning.h"
#include "topology/ledger/ledger.h"
#include "topology/plan/plan.h"

G_BEGIN_DECLS

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
