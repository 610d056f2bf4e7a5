/* The placement engine: a pure function (host, claims, request, options) ->
 * plan. No I/O, no clock, no globals: every decision can be replayed from a
 * recorded host and a ledger snapshot. The plan's views (JSON, text) are
 * topology/status/status.h's. */
#pragma once

#include <glib.h>
#include <hwloc.h>

#include "topology/ledger/claims.h"
#include "topology/base/cpulist.h"
#include "topology/host/host.h"
#include "topology/plan/placement.h"
#include "topology/plan/request.h"

G_BEGIN_DECLS

/* Units of memory on one host node: MiB of ordinary memory, or pages. */
typedef struct {
  int node;
  guint64 units;
} QpNodeUnits;

/* A piece of the guest's memory: where it is bound and what is claimed. */
typedef struct {
  int gnode;                 /* guest node id, -1 for a guest without vNUMA */
  hwloc_bitmap_t host_nodes; /* where it is bound, NULL when not bound */
  QpPolicy policy;
  guint64 mem_mib;     /* claimed (a virtio-mem: its requested-size) */
  char *memdev;        /* the caller's backend id, or NULL */
  gboolean caller_set; /* caller's host-nodes kept as they were */
  QpMemKind kind;
  char *device;     /* the device's id, or NULL */
  guint64 page_kib; /* 0: ordinary memory, else the hugepage size */
  GArray *claim;    /* of QpNodeUnits: MiB, or pages of page_kib */
} QpPlanMem;

/* A guest NUMA node the planner suggests (--vnuma for a guest without
 * -numa): it mirrors one host node of the placement. */
typedef struct {
  int id;               /* guest node id, 0.. */
  hwloc_bitmap_t vcpus; /* vCPU indexes (cpu-index) */
  guint64 mem_mib;
  int host_node; /* the host node it mirrors */
} QpPlanVnode;

/* A device of the guest with a host side (vfio, storage, network). */
typedef struct {
  char *what;     /* "vfio-pci 0000:3b:00.0", "virtio-blk-pci disk0 (...)" */
  char *bdf;      /* the host PCI device, NULL when not found */
  int node;       /* its host node, -1 when unknown */
  char *iothread; /* the iothread that serves it, or NULL */
} QpPlanDevice;

/* An iothread placed near the devices it serves. */
typedef struct {
  char *id;
  int node;            /* the devices' host node */
  hwloc_bitmap_t cpus; /* where it runs */
} QpPlanIothread;

typedef struct {
  QpMode mode;                 /* resolved: never AUTO */
  guint n_vcpus;               /* == request maxcpus */
  hwloc_bitmap_t *vcpu_cpus;   /* per vCPU index; equal to process_cpus
                                  when vCPUs float */
  hwloc_bitmap_t process_cpus; /* CPUs the whole process may use */
  hwloc_bitmap_t emulator_cpus;
  hwloc_bitmap_t iothread_cpus; /* iothreads not in `iothreads` */
  hwloc_bitmap_t startup_cpus;  /* affinity before exec */
  hwloc_bitmap_t mem_nodes;     /* process-wide memory policy nodes, or NULL */
  QpPolicy mem_policy;
  guint n_mem;
  /* Every piece of the guest's memory: the RAM of each guest node (or of
   * the guest) in guest node order, then its memory devices and unused
   * backends in command-line order. */
  QpPlanMem *mem;
  /* What the ledger records for this VM. */
  GArray *claim_mem;        /* of QpNodeAmount */
  GArray *claim_huge;       /* of QpHugeClaim */
  hwloc_bitmap_t dedicated; /* CPUs this VM takes for itself */
  GArray *load;             /* of QpNodeLoad */
  GArray *cpu_load;         /* of QpCpuLoad: shared vCPUs per CPU set */
  GPtrArray *reasons;       /* of char*: each choice in plain words */
  GPtrArray *warnings;      /* of char* */
  /* Mode auto could not give what balanced or numa promise (the vCPUs do
   * not fit their CPUs) and placed the VM as well as it could: NOT_GIVEN
   * says what is missing, and one warning says it too. */
  gboolean best_effort;
  GPtrArray *not_given;      /* of char* */
  hwloc_bitmap_t host_nodes; /* host nodes the VM's vCPUs and memory use */
  /* Suggested guest topology: set only with opts->vnuma on a guest without
   * vNUMA. -smp sockets/cores/threads mirror the chosen CPUs, flat
   * (sockets=1, cores=N, threads=1) when their layout is asymmetric; their
   * product (with dies) is n_vcpus (maxcpus), and the vnodes hold every
   * vCPU. vnuma_dies > 1 when each socket's vCPUs run on as many host L3
   * domains in equal runs (cores then counts cores per die); 0 or 1 else. */
  gboolean vnuma;
  guint vnuma_sockets, vnuma_cores, vnuma_threads;
  guint vnuma_dies;
  guint n_vnodes; /* 0: no -numa node suggested (one host node) */
  QpPlanVnode *vnodes;
  guint *vnode_distance; /* n_vnodes * n_vnodes, SLIT of the host nodes */
  /* one-to-one with hot-pluggable vCPUs (maxcpus > vcpus): cores are
   * dedicated to the boot vCPUs only; a vCPU plugged later takes the first
   * of these cores (usable PUs of each, in order of preference) that no VM
   * holds then, claimed by the keeper; without one it shares the VM's own
   * cores (vcpu_cpus of a hot-pluggable vCPU). */
  guint n_boot_vcpus;
  /* Their indexes (cpu-index): 0 to n_boot_vcpus - 1 unless vCPUs plugged
   * with -device at start fill later slots (QpRequest's boot). NULL: 0 to
   * n_boot_vcpus - 1. */
  hwloc_bitmap_t boot_vcpus;
  GPtrArray *hotplug_cores; /* of hwloc_bitmap_t, or NULL */
  GPtrArray *devices;       /* of QpPlanDevice*, or NULL */
  GPtrArray *iothreads;     /* of QpPlanIothread*, or NULL */
  gboolean device_locality; /* devices' nodes weigh (not --device-locality
                               =ignore): iothreads and guest buses follow */
  /* QEMU starts paused until the keeper has pinned: some thread there at
   * the start (a boot vCPU, the emulator, an iothread) needs CPUs other
   * than startup_cpus. Else every thread runs where the plan says from its
   * first instruction, and QEMU starts as the caller asked. */
  gboolean pause;
  /* `qemu-pin plan` of a running VM's own command line: that VM's record,
   * left out of the ledger the plan was made on (NULL: none), and what
   * matched ("uuid", "id" or "name"). Set by the caller, not the planner;
   * freed with the plan. */
  QpClaim *ignored;
  const char *ignored_by;
} QpPlan;

/* Device I of plan->devices in words, for the ledger and `status`:
 * "virtio-blk-pci disk0 (/dev/vda): PCI 0000:21:00.0, host node 2,
 * iothread io0 on CPUs 4-5". */
char *qp_plan_device_words(const QpPlan *plan, guint i);

/* The iothread ID's entry of PLAN, or NULL. */
const QpPlanIothread *qp_plan_iothread(const QpPlan *plan, const char *id);

/* Whether vCPU INDEX of PLAN runs from the start (a boot vCPU), rather
 * than being plugged later. */
gboolean qp_plan_vcpu_boots(const QpPlan *plan, guint index);

/* Computes a plan. On a request that does not fit, fails with
 * QP_TOPOLOGY_ERROR_NOFIT and a message naming the node and the shortfall. */
QpPlan *qp_plan_compute(const QpHost *host, const QpClaims *claims,
                        const QpRequest *req, const QpPlacementOptions *opts,
                        GError **error);
void qp_plan_free(QpPlan *plan);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QpPlan, qp_plan_free)

/* Splits NEED units over the node indexes SET (K of them) as the planner
 * does: even shares, the remainder on the first node, a node short of its
 * share (AVAIL, reduced) leaving the rest to the others; adds to CLAIM. The
 * caller has checked that SET holds NEED. */
void qp_plan_split_units(guint64 need, const guint *set, guint k,
                         guint64 *avail, guint64 *claim);

G_END_DECLS
