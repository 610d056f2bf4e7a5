/* What the status views (human.c, json.c, metrics.c, picture.c) count
 * beyond each node's capacity (topology/plan/capacity.h): the vCPUs per
 * CPU, what the VMs hold in each cache domain, and whose vCPUs share a VM's
 * dedicated cores. For the views only.
 *
 * Every vCPU that runs on a CPU counts there: the shared vCPUs that float
 * on it (qp_claims_cpu_load()) and, on a CPU a VM has dedicated, that VM's
 * own (one per dedicated CPU). So a dedicated CPU that shared vCPUs float
 * on carries more than one vCPU: it is overcommitted. */
#pragma once

#include <glib.h>
#include <hwloc.h>

#include "topology/host/host.h"
#include "topology/plan/capacity.h"
#include "topology/plan/plan.h"

G_BEGIN_DECLS

/* Shared vCPUs on CPU ID (LOAD from qp_claims_cpu_load()), rounded to
 * hundredths as they are shown. */
double qp_status_cpu_load_of(const QpHost *host, const double *load, int id);

/* Every vCPU on CPU ID: its shared vCPUs (LOAD) and one more when
 * DEDICATED (every VM's dedicated CPUs) holds it; rounded to hundredths. */
double qp_status_cpu_vcpus(const QpHost *host, const double *load,
                           hwloc_const_bitmap_t dedicated, int id);

/* The CPUs of SET that DEDICATED holds and shared vCPUs (LOAD) float on
 * (a new bitmap). */
hwloc_bitmap_t qp_status_shared_dedicated(const QpHost *host,
                                          const double *load,
                                          hwloc_const_bitmap_t dedicated,
                                          hwloc_const_bitmap_t set);

/* vCPUs per CPU of node N where shared vCPUs run: its usable CPUs no VM
 * has dedicated and the dedicated ones they float on (their own vCPU
 * counted); CAP from qp_node_capacity(), LOAD from qp_claims_cpu_load(). */
double qp_status_load_per_cpu(const QpHost *host, const QpNode *n,
                              const QpNodeCapacity *cap, const double *load);

/* CPUs of a node that carry the same number of vCPUs. */
typedef struct {
  hwloc_bitmap_t cpus;
  double per_cpu; /* every vCPU on each (qp_status_cpu_vcpus()) */
} QpLoadGroup;

/* The CPUs of node N that carry shared vCPUs (LOAD from
 * qp_claims_cpu_load()), grouped by their vCPUs (qp_status_cpu_vcpus(),
 * DEDICATED: every VM's dedicated CPUs) in the order of their first CPU
 * (of QpLoadGroup); OVER gets those with more than one vCPU. */
GArray *qp_status_load_groups(const QpHost *host, const QpNode *n,
                              const double *load,
                              hwloc_const_bitmap_t dedicated,
                              hwloc_bitmap_t over);

/* What the VMs of the ledger hold in cache domain D. */
typedef struct {
  guint dedicated_cores; /* cores with a CPU dedicated to a VM */
  double shared_vcpus;   /* shared vCPUs floating on its CPUs */
  double per_cpu;        /* vCPUs per CPU where shared vCPUs run: its CPUs
                            not dedicated, and the dedicated ones they
                            float on with their own vCPU */
} QpCacheUsage;

/* Usage of domain D from DEDICATED (every VM's dedicated CPUs) and LOAD
 * (qp_claims_cpu_load(): old records without per-CPU load spread theirs
 * over their nodes). */
void qp_cache_usage(const QpHost *host, hwloc_const_bitmap_t dedicated,
                    const double *load, guint d, QpCacheUsage *out);

/* Another VM whose shared vCPUs float on a VM's dedicated CPUs. */
typedef struct {
  const QpClaim *with; /* the other VM (of the claims given) */
  hwloc_bitmap_t cpus; /* the dedicated CPUs it shares */
} QpSharer;

/* The VMs of CLAIMS whose shared vCPUs float on the dedicated CPUs of
 * claims->claims[INDEX], in ledger order (of QpSharer; empty when none). */
GArray *qp_status_sharers(const QpHost *host, const QpClaims *claims,
                          guint index);

/* "beta (0b5e2c4e-...)" or the id alone: how a view names the VM C. */
char *qp_status_vm_words(const QpClaim *c);

/* What PLAN says of the record it left out, the running VM of the command
 * line's own -name or -uuid: "beta (0b5e...), qemu pid 42: the running VM
 * of this -name, planned as if it were not there"; NULL when it left out
 * none. */
char *qp_status_ignored_words(const QpPlan *plan);

/* Whether the keeper of C still runs (its PID names a live process called
 * qemu-pin-keeper, or qemu-pin in the moment before the launcher's exec).
 * Its claim holds while QEMU lives either way; without it, hotplug and a
 * caller's placement are no longer followed. */
gboolean qp_status_keeper_running(const QpClaim *c);

/* What the ledger promises beyond the host, one line each (status warns
 * with them; the planner never makes such claims, but a record restored by
 * its keeper, a lock file removed or an older qemu-pin can leave them):
 * each node whose claims exceed its plain memory less the reserve (OPTS),
 * each hugepage pool claimed beyond its pages, each CPU two VMs have
 * dedicated. A node blocked by an unreadable record is not counted. */
GPtrArray *qp_status_overcommitted(const QpHost *host, const QpClaims *claims,
                                   const QpPlacementOptions *opts);

G_END_DECLS
