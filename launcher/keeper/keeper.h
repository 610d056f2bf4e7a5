/* The keeper: a detached process per VM, forked by the launcher inside the
 * claim's critical section, that applies the plan to QEMU's threads over a
 * private monitor, resumes the guest, holds the VM's claim while QEMU runs
 * and releases it when QEMU exits. */
#pragma once

#include <glib.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "launcher/keeper/caller-pinning.h"
#include "topology/ledger/ledger.h"
#include "topology/plan/plan.h"

G_BEGIN_DECLS

/* What the keeper needs, set up by the launcher before the fork. */
typedef struct {
  const QpPlan *plan;
  const QpRequest *req;     /* what PLAN was made from: a move re-plans it */
  const QpCallerHost *host; /* usable CPUs, cores and nodes of the host */
  const char *state_dir;    /* ledger directory (reopened by the keeper) */
  const QpClaim *claim;     /* the record this VM holds: the keeper adopts it */
  int qmp_fd;               /* our end of the private monitor */
  guint64 qemu_end_ino;     /* inode of QEMU's end: finds a daemon by its fds */
  int qemu_pid;             /* the process that is or becomes QEMU; 0 unknown */
  gboolean daemonize;
  /* qemu-pin started QEMU paused (plan->pause, no -S and no -incoming of
   * the caller's): the keeper sends cont once it has pinned. Else every
   * thread ran where the plan says from its first instruction, and the
   * guest runs (or waits for the caller's cont) without the keeper. */
  gboolean paused;
  int status_fd; /* -daemonize: "ok\n" or a line of error; else -1 */
  /* PAUSED without -daemonize: the write end of the guard's pipe
   * (launcher/launch.c, start_guard()), which the keeper holds from its
   * start; a byte on it says QEMU needs no guard any more. Else -1. */
  int guard_fd;
  guint qmp_timeout_ms;
  guint start_timeout_ms;
  int verbose;
  /* Memory may be plugged or resized while the VM runs (-m maxmem, or a
   * virtio-mem device): the keeper watches it and claims what is added,
   * on the host TOPOLOGY (NULL: live) with the reserves of PLACEMENT. */
  gboolean mem_hotplug;
  /* Ids of the memory backends QEMU starts with (NULL-terminated); the
   * rewrite's own are named "qemu-pin-...". Any other backend the keeper
   * finds, at its first look too, was plugged: a QEMU that was not paused
   * may have been given one before the keeper looked. */
  const char *const *start_backends;
  /* -overcommit mem-lock=on: QEMU's mlockall(MCL_FUTURE) makes a backend
   * added later resident as it is made, as if it preallocated. */
  gboolean mem_lock;
  const char *topology;
  const QpPlacementOptions *placement;
} QpKeeperConfig;

/* The address of the control socket of the keeper KEEPER_PID (an abstract
 * unix socket: `qemu-pin move` asks there), its length returned. */
socklen_t qp_keeper_control_address(int keeper_pid, struct sockaddr_un *sa);

/* The "code" of the control socket's answer {"error": ..., "code": ...}
 * when the keeper refuses a move because the caller placed the VM itself
 * (pinned a vCPU, chose a backend's host nodes): a stable word, for
 * `rebalance` to plan again without that VM. */
#define QP_MOVE_REFUSED_CALLER_PLACED "caller-placed"
/* ... and when it refuses for what the VM is (QP_LAUNCH_ERROR_MOVE_REFUSED):
 * such a VM cannot move, whatever the destination. */
#define QP_MOVE_REFUSED "refused"

/* The keeper's life: apply the plan, resume, hold the claim until QEMU
 * exits, then release it. Never returns. It needs no json-glib (QMP is
 * read and written with jvalue.h): a spawned keeper runs it in the module
 * that launched it, the launch module's too. */
G_GNUC_NORETURN void qp_keeper_main(const QpKeeperConfig *cfg);

/* A keeper started (spawn.c), not a child of this process, in a session
 * of its own. */
typedef struct _QpKeeperSpawn QpKeeperSpawn;

/* Starts the keeper sharing this process's memory until the exec, at no
 * copy, before its configuration is known, so that starting it costs the
 * ledger's critical section nothing; QEMU_END is QEMU's end of the
 * monitor, which the keeper closes. For a process that execs QEMU next (or
 * fails and frees the spawn). The keeper starts its work only once the
 * exec is done, and leaves without a word if this process is gone before
 * qp_keeper_spawn_configure(). NULL with ERROR unset where the keeper must
 * be a copy of this process (under valgrind): qp_keeper_spawn() then. */
QpKeeperSpawn *qp_keeper_spawn_ahead(int qemu_end, GError **error);
/* Gives a keeper spawned ahead its configuration: CFG and all it points to
 * must be neither changed nor freed before the exec. FALSE when the keeper
 * could not be made after all (its spawn is then for
 * qp_keeper_spawn_free()). Called before any exec of QEMU: it reaps what
 * the spawn left to reap. */
gboolean qp_keeper_spawn_configure(QpKeeperSpawn *spawn,
                                   const QpKeeperConfig *cfg, GError **error);
/* Starts the keeper of CFG as a copy of this process (forked twice): for a
 * process that stays (-daemonize), or under valgrind. */
QpKeeperSpawn *qp_keeper_spawn(const QpKeeperConfig *cfg, int qemu_end,
                               GError **error);
int qp_keeper_spawn_pid(const QpKeeperSpawn *spawn);

/* After a launch that failed (no exec): the keeper leaves at once. */
void qp_keeper_spawn_free(QpKeeperSpawn *spawn);

G_END_DECLS
