/* Node sets for balanced and one-to-one without vNUMA
 * (topology/plan/node-sets.c). */
#pragma once

#include "topology/plan/context.h"

G_BEGIN_DECLS

typedef struct {
  guint k;
  guint *nodes; /* ascending node index */
} NodeSet;

/* What a node set must hold, and where it may be found. */
typedef struct {
  const Ctx *ctx;
  const Attempt *a;
  CapKind cap;
  const guint64 *avail;    /* units per class and node, AT() */
  const guint64 *mem_need; /* units per class */
  guint cap_need;
  const gboolean *cand;
} SetSearch;

typedef struct {
  guint devices; /* device nodes in the set */
  guint max_d;
  guint64 sum_d; /* of pairwise distances */
  guint64 mem;   /* uncommitted MiB (rank_mib) */
  guint64 cap;
  guint64 load; /* shared vCPUs of other VMs */
  guint64 cpus;
} SetScore;

SetScore score_set(const SetSearch *s, const NodeSet *set);

/* The fewest candidate nodes holding what S needs; among those the
 * closest, then by strategy. For a guest without vNUMA whose RAM the caller
 * bound (host-nodes on -machine memory-backend=, libvirt's <numatune>
 * without cells), the caller's nodes when they have room. NULL with an
 * error naming the shortfall (PREFIX first) when none holds it. */
NodeSet *choose_near_caller_mem(const SetSearch *s, const char *prefix,
                                GError **error);

G_END_DECLS
