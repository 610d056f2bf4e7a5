/* What the status views (human.c, json.c, picture.c) count beyond each
 * node's capacity (topology/plan/capacity.h): the shared vCPUs per CPU and
 * what the VMs hold in each cache domain. For the views only. */
#pragma once

#include <glib.h>
#include <hwloc.h>

#include "topology/plan/capacity.h"
#include "topology/host/host.h"

G_BEGIN_DECLS

/* Shared vCPUs per CPU of the node CAP counts, over its CPUs that no VM
 * has dedicated. */
double qp_status_load_per_cpu(const QpNodeCapacity *cap);

/* Shared vCPUs on CPU ID (LOAD from qp_claims_cpu_load()), rounded to
 * hundredths as they are shown. */
double qp_status_cpu_load_of(const QpHost *host, const double *load, int id);

/* CPUs of a node that carry the same shared load. */
typedef struct {
  hwloc_bitmap_t cpus;
  double per_cpu;
} QpLoadGroup;

/* The CPUs of node N that carry shared vCPUs (LOAD from
 * qp_claims_cpu_load()), grouped by load in the order of their first CPU
 * (of QpLoadGroup); OVER gets those with more than one vCPU per CPU. */
GArray *qp_status_load_groups(const QpHost *host, const QpNode *n,
                              const double *load, hwloc_bitmap_t over);

/* What the VMs of the ledger hold in cache domain D. */
typedef struct {
  guint dedicated_cores; /* cores with a CPU dedicated to a VM */
  double shared_vcpus;   /* shared vCPUs floating on its CPUs */
  double per_cpu;        /* shared_vcpus per CPU not dedicated */
} QpCacheUsage;

/* Usage of domain D from DEDICATED (every VM's dedicated CPUs) and LOAD
 * (qp_claims_cpu_load(): old records without per-CPU load spread theirs
 * over their nodes). */
void qp_cache_usage(const QpHost *host, hwloc_const_bitmap_t dedicated,
                    const double *load, guint d, QpCacheUsage *out);

G_END_DECLS
