/* The keeper's state and the steps its files share (launcher/keeper/):
 * keeper.c its life, qemu-process.c the watch over QEMU's process,
 * pinning.c the look at QEMU's threads, cores.c the cores claimed while the
 * VM runs, hold.c the wait while it runs, memory.c memory plugged later. */
#pragma once

#include <glib.h>
#include <hwloc.h>

#include "launcher/keeper/caller-pinning.h"
#include "launcher/keeper/keeper.h"
#include "launcher/keeper/memory.h"
#include "qmp/qmp.h"
#include "qp-error.h"

G_BEGIN_DECLS

typedef struct {
  const QpKeeperConfig *cfg;
  /* The plan in force and what the keeper knows of the host for it: the
   * launcher's (cfg), or after a move the keeper's own (own_*). */
  const QpPlan *plan;
  const QpCallerHost *host;
  QpPlan *own_plan;
  QpCallerHost *own_host;
  int control_fd;     /* the control socket (move.c), or -1 */
  QpHeldClaim *claim; /* the VM's claim, ours from the start */
  QpQmp *qmp;
  int qemu_pid;
  int pidfd;          /* -1: no pidfd (kernel < 5.3, valgrind): poll /proc */
  int guard_fd;       /* the guard's pipe while QEMU waits paused, or -1 */
  guint64 qemu_start; /* start time of qemu_pid, when it is known */
  gboolean greeted;   /* the handshake succeeded */
  gint64 greeted_waited_us; /* qp_qmp_waited_us() once greeted */
  gboolean applied;         /* every thread runs where the plan says */
  /* The threads the first look found (of QpVcpu, of QpIothread), until
   * the guest a paused start holds runs (keeper.c, resume()); else NULL. */
  GArray *first_vcpus;
  GArray *first_iothreads;
  gboolean reported; /* -daemonize: the launcher has our word */
  gint64 t0;
  /* one-to-one hotplug: cpu-index -> the core (PUs) claimed for it */
  GHashTable *plugged;
  GHashTable *plugged_pu; /* cpu-index -> the PU of that core it runs on */
  GHashTable *warned;     /* cpu-indexes already warned about */
  /* The cores of plugged vCPUs the last look kept the emulator's and the
   * iothreads' sets off (pinning.c), or NULL: none yet. */
  hwloc_bitmap_t plugged_off;
  QpMemWatch *mem;        /* memory plugged later, or NULL */
  gboolean mem_unwatched; /* QEMU could not say its memory: not again */
  /* vCPU index -> the VM's own cores, for a vCPU whose planned core another
   * VM took while the caller had it elsewhere */
  GHashTable *fallback;
  QpCallerPins *pins;      /* the threads' affinities, the caller's decisions */
  gboolean unwritten;      /* the claim changed since the record was written */
  gint64 next_look_at;     /* when to look for threads moved by the caller */
  gint64 next_resident_at; /* when to measure QEMU's resident memory */
  /* The nodes QEMU could take memory from as the keeper began to hold it
   * (NULL: unknown), and, once the caller narrowed them (its cpuset.mems)
   * off the claim's, what it allowed, in words (resident.c). */
  hwloc_bitmap_t mems_at_start;
  char *mems_narrowed;
  /* QEMU said it is exiting (SHUTDOWN on a host signal or quit): when it
   * is still there a while later, the signal is sent again. */
  gint64 exiting_since;
  guint nudges;
} Keeper;

/* How often the keeper looks whether someone moved a thread while no QMP
 * event said so (`virsh vcpupin` on a running VM): one sched_getaffinity
 * per vCPU, iothread and the main thread, no QMP unless one moved. */
#define LOOK_EVERY_MS 5000

/* How often the keeper measures its QEMU's resident memory per node, and by
 * how much on a node it must have moved to be written into the record. */
#define RESIDENT_EVERY_MS 10000
#define RESIDENT_STEP_MIB 32
/* At most this much memory beyond the claim on one node is moved to
 * another node of the claim at each measure (resident.c). */
#define EVEN_OUT_MAX_MIB 512

/* ---- The keeper's log (log.c) ------------------------------------------- */

/* A line of the keeper's log at verbosity LEVEL, with the time since it
 * started. */
void qp_keeper_log(Keeper *k, int level, const char *fmt, ...)
    G_GNUC_PRINTF(3, 4);

/* ---- QEMU's process (qemu-process.c) ------------------------------------ */

/* Starts watching QEMU (PID): a pidfd, or its start time where the kernel
 * (or valgrind) has no pidfd_open. FALSE if it is already gone. */
gboolean qp_keeper_watch_qemu(Keeper *k, int pid);
gboolean qp_keeper_watching(const Keeper *k);

/* TRUE once QEMU has exited, waiting up to TIMEOUT_MS. */
gboolean qp_keeper_qemu_gone(Keeper *k, int timeout_ms);
void qp_keeper_signal_qemu(Keeper *k, int sig);

/* The process of thread TID, -1 when it is gone. */
int qp_keeper_tgid_of(int tid);

/* Waits until the monitor has something to say, QEMU exits
 * (QP_LAUNCH_ERROR_QEMU_EXITED), or the start timeout passes. */
gboolean qp_keeper_wait_for_greeting(Keeper *k, GError **error);

/* -daemonize before the daemon's PID is known: whether a process holds
 * QEMU's end of the monitor's socket pair; with AND_KILL, each is killed. */
gboolean qp_keeper_monitor_peers(Keeper *k, gboolean and_kill);

/* -daemonize: the daemon's PID, once it alone holds QEMU's end of the
 * monitor (its first process and the one between them gone), within
 * TIMEOUT_MS; 0 with ERROR set when none does or two still do then. */
int qp_keeper_monitor_daemon(Keeper *k, guint timeout_ms, GError **error);

/* ---- Cores claimed while the VM runs (cores.c) -------------------------- */

/* Gives back the cores of vCPUs that were unplugged (missing from VCPUS);
 * TRUE if any (the record is rewritten after the look, with what the
 * caller changed). */
gboolean qp_keeper_release_unplugged(Keeper *k, GArray *vcpus);

/* The cores claimed for plugged vCPUs (one-to-one), together (a new
 * bitmap). */
hwloc_bitmap_t qp_keeper_plugged_cores(const Keeper *k);

/* The plan changed (a move; k->plan is the new one): the cores claimed for
 * plugged vCPUs leave the claim, but for the plan's own (in memory: the
 * next write carries it), and the vCPUs' fallbacks are forgotten; the next
 * look claims cores of the new plan for the plugged vCPUs. */
void qp_keeper_forget_plugged(Keeper *k);

/* Where vCPU INDEX belongs: its planned set, or for a vCPU plugged into a
 * one-to-one VM the core claimed for it (claimed now if need be). */
hwloc_const_bitmap_t qp_keeper_vcpu_target(Keeper *k, int index);

/* The core planned (boot vCPU) or claimed (plugged vCPU) for vCPU INDEX in
 * one-to-one, or NULL. */
hwloc_const_bitmap_t qp_keeper_vcpu_core(Keeper *k, guint index);

/* vCPU INDEX goes back to the plan (WANT) after the caller had it
 * elsewhere: its core was given back then, and is claimed again if no VM
 * took it meanwhile. Else it shares the VM's own cores from now on, with a
 * warning. Returns where it goes. */
hwloc_const_bitmap_t qp_keeper_reclaim_core(Keeper *k, guint index,
                                            hwloc_const_bitmap_t want);

/* ---- QEMU's threads (pinning.c) ----------------------------------------- */

/* Looks at every thread of QEMU (VCPUS, IOTHREADS as QMP reports them):
 * the plan goes back where a thread was reset, the caller's pinning stays,
 * the record follows. CHANGED (may be NULL): how many threads moved. */
gboolean qp_keeper_look_and_apply(Keeper *k, GArray *vcpus, GArray *iothreads,
                                  guint *changed, GError **error);

/* The same, asking QMP for the threads first. */
gboolean qp_keeper_query_and_apply(Keeper *k, guint *changed, GError **error);

/* Why the VM's placement is the caller's own, in words ("the caller pinned
 * vCPU 0 itself", "the caller chose the host nodes of memory backend m0"),
 * or NULL, as the last look found it: the record says so
 * ("caller-placed"), and a move is refused for it (move.c). */
char *qp_keeper_caller_placed(const Keeper *k);

/* Says which guest memory stays where the caller bound it (host-nodes of
 * its backend), claimed there. */
void qp_keeper_say_caller_memory(Keeper *k);

/* ---- Moves (move.c) ------------------------------------------------------ */

/* Listens on the control socket (keeper.h, qp_keeper_control_address()):
 * CONTROL_FD, -1 when it cannot. */
void qp_keeper_control_open(Keeper *k);

/* Serves one request on the control socket: a move, answered and done
 * before the keeper goes on. */
void qp_keeper_control_serve(Keeper *k);

/* ---- Resident memory (resident.c) --------------------------------------- */

/* Measures QEMU's ordinary memory per node (numa_maps) and writes it into
 * the record when it moved; the next measure is due RESIDENT_EVERY_MS on. */
void qp_keeper_measure_resident(Keeper *k);

/* A VM without maxmem or virtio-mem: looks whether the caller gave it a
 * memory backend no device uses (object-add), and claims or gives back
 * what changed (hold.c; with each resident measure, and before a move). */
void qp_keeper_look_at_unplugged_memory(Keeper *k);

/* As the keeper starts holding the VM: measures at once a VM that
 * preallocates or runs under -overcommit mem-lock=on (those pages are
 * resident by now, and their claim no longer outstanding); any other has little
 * resident yet, and its first measure is due RESIDENT_EVERY_MS on, so that no
 * walk of QEMU's page tables (under its mmap lock) runs beside QEMU's start. */
void qp_keeper_resident_start(Keeper *k);

/* ---- While the VM runs (hold.c) ----------------------------------------- */

/* Holds the claim until QEMU exits, re-applying the plan on RESUME, and
 * looking every LOOK_EVERY_MS whether the caller moved a thread. */
void qp_keeper_hold(Keeper *k);

/* QEMU is still there after it said it exits: SIGTERM again. */
void qp_keeper_nudge(Keeper *k);

/* QEMU 7.2 can hang for good in its monitor cleanup after SIGTERM when a
 * QMP command was in flight: the wakeup of the dispatcher is lost, and only
 * another signal (or event on its main loop) brings it back. Plain QEMU does
 * it too; pinned VMs here did more often (docs/robustness.md, finding 10).
 * A QEMU that said it exits is nudged after this long. */
#define NUDGE_AFTER_MS 1000

G_END_DECLS
