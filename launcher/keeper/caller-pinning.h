/* The caller's own placement. An orchestrator may pin QEMU's threads itself
 * (libvirt's <vcpupin>, <emulatorpin>, <iothreadpin>, `virsh vcpupin`,
 * `taskset -p`): qemu-pin keeps such a decision, claims what the VM really
 * uses, and puts its plan back only on a thread that was reset.
 *
 * The CPUs the VM may use ("usable"): the host's online CPUs that are in
 * QEMU's cgroup cpuset and in the CPU affinity qemu-pin was started with,
 * less isolated CPUs (the host model's allowed CPUs), within --affinity.
 *
 * A thread's affinity is
 * - planned: equal to the plan's set for that thread;
 * - a reset: it holds every usable CPU (libvirt without <vcpupin> sets each
 *   vCPU to all online CPUs, or to its <vcpu cpuset>, which qemu-pin was
 *   started in and so plans in) and none of the CPUs "beyond" them that
 *   only QEMU's cgroup and start affinity kept out (libvirt starts QEMU on
 *   <emulatorpin>, in its emulator cgroup, and then sets each vCPU to all
 *   online CPUs: those vCPUs float there, as with QEMU alone; `virsh
 *   vcpupin` beyond a <vcpu cpuset> is the caller's too), or, on a thread
 *   seen for the first time, a set it inherited from a thread qemu-pin
 *   pinned (the startup CPUs, the emulator's set): the plan is put back;
 * - the caller's: anything else, that is not the plan. It is kept as it
 *   is.
 *
 * A host CPU taken offline is out of every thread's affinity as the kernel
 * shows it (sched_getaffinity() gives the set less the CPUs offline, and
 * nothing when all of them are), though the thread keeps it and runs there
 * again once it is back: each set is judged on the CPUs online now. A
 * thread whose CPUs are all offline is not the caller's: the kernel shows
 * no CPU for it until it runs, then runs it on every CPU of its cgroup;
 * where the plan's CPUs are all offline it is left there, and put back once
 * they are online. */
#pragma once

#include <glib.h>
#include <hwloc.h>

#include "topology/host/host.h"
#include "topology/plan/plan.h"

G_BEGIN_DECLS

typedef enum {
  QP_PIN_PLANNED, /* where the plan puts it */
  QP_PIN_RESET,   /* every usable CPU, or inherited: put the plan back */
  QP_PIN_CALLER,  /* the caller's decision: keep it */
} QpPinVerdict;

/* The verdict on a thread whose affinity is HAVE and whose planned set is
 * WANT. INHERITED (N_INHERITED sets, may be NULL) are the sets a new thread
 * inherits from threads qemu-pin pinned; pass them only for a thread not
 * seen before. */
QpPinVerdict qp_caller_judge(hwloc_const_bitmap_t have,
                             hwloc_const_bitmap_t want,
                             hwloc_const_bitmap_t usable,
                             hwloc_const_bitmap_t beyond,
                             const hwloc_const_bitmap_t *inherited,
                             guint n_inherited);

/* qp_caller_judge() on the CPUs ONLINE now (NULL: every CPU is): WANT,
 * USABLE and INHERITED less the CPUs offline, as HAVE is. HAVE with no CPU
 * (they all went offline) is planned, and so is a reset while WANT's CPUs
 * are all offline: there is nowhere to put the plan back yet. */
QpPinVerdict qp_caller_judge_online(hwloc_const_bitmap_t have,
                                    hwloc_const_bitmap_t want,
                                    hwloc_const_bitmap_t usable,
                                    hwloc_const_bitmap_t beyond,
                                    const hwloc_const_bitmap_t *inherited,
                                    guint n_inherited,
                                    hwloc_const_bitmap_t online);

/* What the keeper needs of the host model, taken by the launcher before the
 * fork (the keeper does not load the host). */
typedef struct {
  hwloc_bitmap_t usable; /* the CPUs the VM may use */
  /* the CPUs only the cgroup and start affinity kept out of usable (not
   * isolated, within --affinity), or NULL */
  hwloc_bitmap_t beyond;
  guint n_vcpus;
  /* one-to-one: every PU of the core holding vCPU i's planned CPU, for the
   * boot vCPUs; NULL elsewhere */
  hwloc_bitmap_t *vcpu_core;
  guint n_nodes;
  int *node_id;
  hwloc_bitmap_t *node_cpus; /* every CPU of the node */
} QpCallerHost;

QpCallerHost *qp_caller_host_new(const QpHost *host, const QpPlan *plan,
                                 hwloc_const_bitmap_t affinity);
void qp_caller_host_free(QpCallerHost *h);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QpCallerHost, qp_caller_host_free)

/* The claim as the VM uses it. EFFECTIVE[i] (n_vcpus entries, NULL: none)
 * are the CPUs vCPU i may run on now; CORES[i] the core planned or claimed
 * for it (NULL: none); HELD the dedicated CPUs the record holds. Sets
 * DEDICATED to HELD less every such core that no vCPU may run on (a core is
 * never added here: that takes a claim), LOAD (of QpNodeLoad, emptied
 * first) to the vCPUs that run off the VM's dedicated cores, by node: the
 * vCPUs of one CPU set split evenly over the nodes it touches, the
 * remainder one each to the lowest nodes; and CPU_LOAD (of QpCpuLoad, from
 * qp_cpu_load_array_new(), emptied first) to the same vCPUs by CPU set, in
 * the order of their lowest vCPU. */
void qp_caller_claim(const QpCallerHost *host,
                     const hwloc_const_bitmap_t *effective,
                     const hwloc_const_bitmap_t *cores,
                     hwloc_const_bitmap_t held, hwloc_bitmap_t dedicated,
                     GArray *load, GArray *cpu_load);

/* TRUE when the QpNodeLoad arrays A and B are equal. */
gboolean qp_caller_load_equal(const GArray *a, const GArray *b);

/* TRUE when the QpCpuLoad arrays A and B are equal, set by set in order. */
gboolean qp_caller_cpu_load_equal(const GArray *a, const GArray *b);

/* A look at the threads in one line: CHANGES (the caller's decisions, may
 * be NULL), then the claim: "claim: dedicated CPUs 1 (was 0-1), shared
 * vCPUs none". */
char *qp_caller_look_text(const char *changes, hwloc_const_bitmap_t before,
                          hwloc_const_bitmap_t dedicated, const GArray *load);

/* What the keeper has seen of QEMU's vCPU threads, iothreads and main
 * thread: their affinity, and the caller's decision if there is one. */
typedef struct QpCallerPins QpCallerPins;

QpCallerPins *qp_caller_pins_new(guint n_vcpus);
void qp_caller_pins_free(QpCallerPins *pins);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QpCallerPins, qp_caller_pins_free)

/* A look at every thread: begin, one judge per thread, end. */
void qp_caller_pins_begin(QpCallerPins *pins);

/* The CPUs online for the judges of this look on (NULL, the default:
 * every CPU), as qp_caller_judge_online() takes them. */
void qp_caller_pins_set_online(QpCallerPins *pins, hwloc_const_bitmap_t online);

/* The verdict on thread TID (WHAT names it: "vCPU 0", "the emulator thread",
 * "iothread io0"; VCPU is its vCPU index or -1), as qp_caller_judge(); the
 * inherited sets count only when TID was not seen before, and the CPUs
 * online are the last qp_caller_pins_set_online()'s. Remembers HAVE, or
 * WANT's online CPUs on a reset (the keeper pins it there). A thread seen
 * before that now shows no CPU (its CPUs all went offline) keeps its last
 * verdict: the caller's CPUs stay the caller's. */
QpPinVerdict qp_caller_pins_judge(QpCallerPins *pins, int tid, const char *what,
                                  int vcpu, hwloc_const_bitmap_t have,
                                  hwloc_const_bitmap_t want,
                                  hwloc_const_bitmap_t usable,
                                  hwloc_const_bitmap_t beyond,
                                  const hwloc_const_bitmap_t *inherited,
                                  guint n_inherited);

/* Forgets threads not judged since begin. Returns what changed in the
 * caller's decisions since the last look, in words ("vCPU 0 on CPUs 1 kept
 * (the caller's), vCPU 1 reset: the plan is back"), or NULL. */
char *qp_caller_pins_end(QpCallerPins *pins);

/* The caller's CPUs for vCPU INDEX, or NULL when it runs on the plan. */
hwloc_const_bitmap_t qp_caller_pins_vcpu(const QpCallerPins *pins, guint index);

/* The WHAT of a thread other than a vCPU (the emulator thread, an
 * iothread) that runs on the caller's CPUs, the lowest thread id first, or
 * NULL: the VM's placement is then the caller's too. */
const char *qp_caller_pins_other(const QpCallerPins *pins);

/* TRUE when a watched thread's affinity differs from what was seen last
 * (sched_getaffinity of each: no QMP), i.e. someone moved it. A thread that
 * is gone does not count. */
gboolean qp_caller_pins_moved(const QpCallerPins *pins);

/* The caller narrowed the nodes QEMU may take memory from to ALLOWED (its
 * cgroup's cpuset.mems: `virsh numatune --live`, an orchestrator's own
 * cgroup), and the kernel moved its pages there and rebound its policies
 * (robustness finding 51). The claim's memory (MEM, of QpNodeAmount)
 * follows: a new array, or NULL when every node of MEM is still allowed.
 * A node still allowed keeps its claim; what was claimed on the others
 * goes first to the allowed nodes where the VM holds more (RESIDENT, MiB
 * per node) than it claims there, then to the allowed node that holds the
 * most of it (the lowest allowed node when none holds any). The total
 * stays as it was. */
GArray *qp_caller_mems_claim(const GArray *mem, hwloc_const_bitmap_t allowed,
                             const GArray *resident);

/* Whether a caller narrowed QEMU's memory nodes: some node of HAD (the
 * nodes QEMU could take memory from) is not in ALLOWED (its
 * Mems_allowed_list now) and still has memory (in WITH_MEMORY, the host's
 * nodes with memory online; NULL when unknown: every node has). A node
 * whose memory went offline entirely leaves every cpuset's effective mems
 * by the kernel's hand, and no caller chose that (robustness finding 73):
 * such nodes of HAD are added to GONE (may be NULL). */
gboolean qp_caller_mems_narrowed(hwloc_const_bitmap_t had,
                                 hwloc_const_bitmap_t allowed,
                                 hwloc_const_bitmap_t with_memory,
                                 hwloc_bitmap_t gone);

G_END_DECLS
