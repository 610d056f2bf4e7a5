/* Node sets for balanced and one-to-one without vNUMA
 * (topology/plan/node-sets.c). */
#pragma once

#include "topology/plan/memory.h"

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

SetScore qp_plan_score_set(const SetSearch *s, const NodeSet *set);

/* The fewest candidate nodes holding what S needs; among those the
 * closest, then by strategy. For a guest without vNUMA whose RAM the caller
 * bound (host-nodes on -machine memory-backend=, libvirt's <numatune>
 * without cells), the caller's nodes when they have room. NULL with an
 * error naming the shortfall (PREFIX first) when none holds it. */
NodeSet *qp_plan_choose_near_caller_mem(const SetSearch *s, const char *prefix,
                                        GError **error);

/* A guest placed on one node set (balanced, one-to-one without vNUMA). */
typedef struct {
  guint64 *avail;     /* memory units left per class and node, AT() */
  guint64 *need;      /* units per class of the pieces placed on the set */
  gboolean *cand;     /* candidate node indexes */
  SetSearch s;        /* the search that chose the set */
  guint *nodes;       /* the set: node indexes, ascending */
  guint k;            /* nodes in the set */
  hwloc_bitmap_t ids; /* their node ids */
} GuestSet;

/* Claims in ACC the memory the caller bound (on its nodes), then chooses
 * the set for the rest of the memory and CAP_NEED units of CAP (see
 * qp_plan_choose_near_caller_mem()). Clear G with qp_plan_guest_set_clear()
 * either way. */
gboolean qp_plan_guest_set_choose(GuestSet *g, const Ctx *ctx, const Attempt *a,
                                  Acc *acc, CapKind cap, guint cap_need,
                                  GError **error);
void qp_plan_guest_set_clear(GuestSet *g);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(GuestSet, qp_plan_guest_set_clear)

G_END_DECLS
