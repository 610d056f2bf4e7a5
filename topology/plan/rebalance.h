/* The rebalance planner: which running VMs to move between host nodes, and
 * where, so that (c) no node's claims exceed its memory (it shrank under
 * them: memory taken offline), (a) VMs that span nodes come back to one
 * node where room allows and (b) with a request, that VM fits on the
 * fewest nodes its mode allows. A pure function of (host, live claims, what
 * each VM allows, request, options), like qp_plan_compute(): no I/O, no clock
 * (the time is an input), so `qemu-pin rebalance`, `--make-room`, `status` and
 * the simulator all plan the same moves.
 *
 * What it never moves: a VM whose placement the caller chose (its own
 * pinning, host-nodes of its backends), a VM with VFIO devices (pinned
 * pages), a VM moved less than the cooldown ago, a VM holding hugepages
 * (pool pages are not migrated), a VM in mode none, and any claim the
 * caller gave no QpRebalanceVm for. A moved VM stays inside the host nodes
 * and CPUs it was started with, goes only where its memory fits under its
 * own reserve too (as its keeper checks the move), keeps its mode (balanced:
 * one node's CPUs; one-to-one: free cores at the destination; numa: each guest
 * node to its own host node, in guest node order) and moves at most once per
 * rebalance.
 *
 * What it guarantees (a greedy and a bounded search, not an exhaustive
 * search):
 * - (c), first: while a node's claims exceed its plain memory less the
 *   reserve (what `status` calls overcommitted), a balanced or one-to-one
 *   VM with memory there goes whole to another node with room for it, a
 *   numa VM's piece there to a node of its own: of the VMs whose move
 *   alone brings the node within its memory, the one that moves the
 *   fewest MiB; when none does, the one that takes the most off it. A
 *   node no VM can leave stays overcommitted (robustness.md, finding 71).
 * - (a) every move brings one spanning VM onto one node, the VM and node
 *   whose move costs the fewest MiB first; no move makes any VM span.
 *   When no node has room for any spanning VM as things stand, a chain:
 *   the search below (b) frees room for it on one node by moving others,
 *   each whole to one node, at most as many MiB of them as the VM holds;
 *   the chain of fewest MiB in all first, again while one is found.
 * - (b) the node count is the fewest k, from the least any k nodes of the
 *   empty host could hold up to one below the count without moves, for
 *   which a candidate set (each single node; for k > 1 each node with its
 *   k - 1 closest) can be cleared, by the greedy or by the search; among
 *   the plans for those sets the one that moves the fewest MiB wins.
 *   The greedy moves VMs only to room that is there. On a set short of D
 *   MiB, one VM that frees D alone is the cheapest such VM (optimal when
 *   one move is enough); else VMs go largest first until one covers what
 *   is left, so the MiB moved are less than D plus the largest movable VM
 *   on the set (plus what a spanning VM has outside it).
 *   The search (when memory is what the set is short of) looks at the
 *   plans that move balanced and one-to-one VMs off the set, each whole
 *   to one node that has room for it, or that gets room when one or two
 *   of its own VMs (none on the set) first go to their best fit: a chain.
 *   Branch and bound on the MiB moved (a MiB freed moves at least a MiB),
 *   holes of the same size tried once, at most 12 moves, 2048 plans
 *   looked at per set and 8192 per rebalance: within those bounds the
 *   plan of fewest MiB. Its plan is made again on the claims with the
 *   greedy's own checks at each step, and dropped if one fails; it wins
 *   only by moving fewer MiB than the greedy's best for the same k.
 *   When the host's room (memory less reserve and claims, over every
 *   node) is short of the request, no moves can make it fit: none is
 *   planned. The request's room is held while (a) runs, so (a) never
 *   takes it back.
 * Every move is to room that is uncommitted when it is made, in order:
 * made one after the other, no step over-commits a node.
 *
 * Cost (bench/simulate --timing, the 16-node synthetic host of 64 GiB
 * nodes, up to 107 live VMs, 6706 calls in storms and churn, on a quiet
 * 2-CPU host): 0.53 ms per call at the median, 4.5 ms at the 99th
 * percentile, 6-9 ms at most (0.09 / 4.0 / 5.5 ms before goal (a)'s
 * chains, which search for each spanning VM and node on every pass; runs
 * beside other work took up to twice as long); the greedy's
 * qp_plan_compute() after each eviction is most of the rest; the search
 * looks at about a plan per 1.3 us, and its bound of 8192 plans per
 * rebalance (goal (b)'s and (a)'s each) keeps it near 10 ms. */
#pragma once

#include <glib.h>
#include <hwloc.h>

#include "topology/host/host.h"
#include "topology/ledger/claims.h"
#include "topology/plan/placement.h"
#include "topology/plan/plan.h"
#include "topology/plan/request.h"

G_BEGIN_DECLS

/* What one live VM allows, beside its claim. The ledger's record does not
 * say all of it: the caller fills what it knows from the VM's command line
 * and the record (the launch's options, the keeper). */
typedef struct {
  const char *id;       /* the claim's record id */
  gboolean caller_set;  /* the caller placed it: its own pinning, host-nodes
                           of its backends, libvirt's <numatune> */
  gboolean vfio;        /* VFIO devices (a "vfio-pci" device in the claim's
                           devices counts too) */
  hwloc_bitmap_t nodes; /* host nodes it was started inside; NULL: any */
  hwloc_bitmap_t cpus;  /* CPUs it was started inside (--affinity); NULL */
  gint64 moved_at;      /* unix time of its last move; 0: never moved */
  const char *why;      /* why it cannot move at all (its keeper), or NULL */
  /* The host reserve it was started with (of QpNodeAmount: MiB per node,
   * a node without an entry 0), which its keeper plans a move with; NULL:
   * none. A move fits under the larger of it and the rebalance's own
   * (QpRebalanceOptions.opts) on each node. */
  const GArray *reserve;
} QpRebalanceVm;

typedef struct {
  gint64 now;        /* unix time, for the cooldown */
  gint64 cooldown_s; /* a VM moved less than this ago stays */
  /* The VM to make room for, and its options (also the host reserve for
   * every move); NULL: goal (a) alone. */
  const QpRequest *req;
  const QpPlacementOptions *opts;
  gboolean no_consolidate; /* skip goal (a): make room for REQ only */
} QpRebalanceOptions;

/* Guest node GNODE's RAM: from host node FROM to TO (mode numa). */
typedef struct {
  int from, to;
} QpNodePair;

typedef struct {
  char *vm;             /* record id */
  QpMode mode;          /* the VM's, kept */
  hwloc_bitmap_t from;  /* host nodes of its memory and vCPUs before */
  hwloc_bitmap_t to;    /* and after */
  GArray *pairs;        /* numa: of QpNodePair, each node that changed, in
                           the record's node order; empty otherwise */
  guint64 mib;          /* memory that changes node */
  gboolean consolidate; /* goal (a) (TRUE) or room for the request */
  int relieves;         /* goal (c): the overcommitted node it leaves, or
                           -1 */
} QpMove;

typedef struct {
  GPtrArray *moves; /* of QpMove*, in the order to make them */
  guint64 mib;      /* sum over the moves */
  QpClaims *after;  /* the live claims once the moves are made: the moved
                       VMs' claims rewritten, the others copied */
  guint spanning_before, spanning_after; /* VMs of balanced or one-to-one
                                            on more than one node */
  /* With a request: host nodes its plan takes without the moves (0: it
   * does not fit) and after them, and the plan after them (NULL when it
   * still does not fit; ERROR of qp_rebalance_compute is not set then). */
  guint req_nodes_before, req_nodes_after;
  QpPlan *plan;
  GPtrArray *kept; /* of char*: each VM that may not move, and why */
} QpRebalance;

void qp_rebalance_free(QpRebalance *r);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QpRebalance, qp_rebalance_free)

/* TRUE when CLAIM names a VFIO device among its devices. */
gboolean qp_claim_has_vfio(const QpClaim *claim);

/* Plans the moves. VMS (N_VMS of them) say what each claim of CLAIMS
 * allows; a claim without one is never moved. Fails only where
 * qp_plan_compute() would fail for another reason than room. */
QpRebalance *qp_rebalance_compute(const QpHost *host, const QpClaims *claims,
                                  const QpRebalanceVm *vms, guint n_vms,
                                  const QpRebalanceOptions *o, GError **error);

G_END_DECLS
