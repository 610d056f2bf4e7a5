/* Cache domains of the host model (QpCacheDomain in host.h): read from
 * hwloc's caches, and shown in `qemu-pin topology`. */
#pragma once

#include "topology/claims.h"
#include "topology/host.h"

G_BEGIN_DECLS

/* Fills host->domains and cores[].domain from TOPO's L3 and L2 caches;
 * host->cpus, cores and nodes are filled already. */
void qp_host_fill_cache_domains(QpHost *host, hwloc_topology_t topo);

void qp_host_free_cache_domains(QpHost *host);

/* "L3" or "L2" */
const char *qp_cache_level_name(int level);

/* The domains of node ID as a JSON array member "cache_domains". */
void qp_cache_domains_to_json(const QpHost *host, int id, JsonBuilder *b);

/* "node 0 cache domains: L3 0-1,16-17 (8 MiB), L3 2-3,18-19 (8 MiB)\n" for
 * a node with domains. */
void qp_cache_domains_to_text(const QpHost *host, int id, GString *s);

/* What the VMs of the ledger hold in domain D. */
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

/* `status --json`: "cache-domains" of node ID with their usage. */
void qp_cache_usage_to_json(const QpHost *host, hwloc_const_bitmap_t dedicated,
                            const double *load, int id, JsonBuilder *b);

/* `status`: one line per L3 domain of node ID, "  L3 0-1,16-17: 1 of 2
 * cores dedicated, 1.50 shared vCPUs (0.75 per CPU)". */
void qp_cache_usage_to_text(const QpHost *host, hwloc_const_bitmap_t dedicated,
                            const double *load, int id, GString *s);

G_END_DECLS
