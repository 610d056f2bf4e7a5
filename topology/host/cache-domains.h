/* Cache domains of the host model (QpCacheDomain in host.h), read from
 * hwloc's caches. */
#pragma once

#include "topology/host/host.h"

G_BEGIN_DECLS

/* Fills host->domains and cores[].domain from TOPO's L3 and L2 caches;
 * host->cpus, cores and nodes are filled already. */
void qp_host_fill_cache_domains(QpHost *host, hwloc_topology_t topo);

void qp_host_free_cache_domains(QpHost *host);

/* "L3" or "L2" */
const char *qp_cache_level_name(int level);

G_END_DECLS
