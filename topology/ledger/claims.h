/* What a VM holds, as its ledger record says (QpClaim), and what the
 * ledger holds (QpClaims): the types the planner and the views read. The
 * record's forms on disk are record.h's. */
#pragma once

#include <glib.h>
#include <hwloc.h>

#include "topology/base/cpulist.h"
#include "topology/base/names.h"

G_BEGIN_DECLS

/* Ordinary memory on one host node, in MiB. */
typedef struct {
  int node;
  guint64 mib;
} QpNodeAmount;

/* The MiB of NODE in AMOUNTS (of QpNodeAmount), 0 when it has no entry. */
guint64 qp_node_amount_of(const GArray *amounts, int node);

/* Adds MIB to NODE's entry of AMOUNTS (of QpNodeAmount), appending one when
 * there is none. */
void qp_node_amount_add(GArray *amounts, int node, guint64 mib);

typedef struct {
  int node;
  guint64 page_kib;
  guint64 pages;
} QpHugeClaim;

typedef struct {
  int node;
  guint vcpus;
} QpNodeLoad;

/* Shared vCPUs that float on a set of CPUs (a VM's vCPUs with the same CPU
 * set): each CPU of the set carries vcpus / |cpus| of them. */
typedef struct {
  hwloc_bitmap_t cpus;
  guint vcpus;
} QpCpuLoad;

/* An empty GArray of QpCpuLoad that frees the sets with it. */
GArray *qp_cpu_load_array_new(void);

/* Makes DST (from qp_cpu_load_array_new()) a copy of SRC (NULL: empty). */
void qp_cpu_load_copy(GArray *dst, const GArray *src);

typedef struct {
  char *id;   /* ledger record id */
  char *name; /* VM name, or NULL */
  char *uuid; /* QEMU's -uuid, or NULL */
  int qemu_pid;
  guint64 qemu_start; /* field 22 of /proc/PID/stat */
  int launcher_pid;   /* qemu-pin while it waits for -daemonize, else 0 */
  guint64 launcher_start;
  int keeper_pid;
  QpMode mode;
  GArray *mem;              /* of QpNodeAmount */
  GArray *huge;             /* of QpHugeClaim */
  hwloc_bitmap_t dedicated; /* CPUs no other VM may use */
  GArray *load;             /* of QpNodeLoad: shared vCPUs per node */
  GArray *cpu_load;         /* of QpCpuLoad: the same vCPUs per CPU set;
                               may be empty: the per-node load then
                               spreads over the node's CPUs */
  gboolean best_effort;     /* placed best-effort by mode auto */
  gint64 time;              /* unix time of the claim */
  gint64 moved_at;          /* unix time of the last `qemu-pin move` that
                               ended, 0: never moved; a record whose value
                               changed was rewritten by a move */
  gboolean caller_placed;   /* its keeper found the caller placed it: vCPUs
                               pinned, backends' host nodes chosen; never
                               moved (it can only pin its own VM) */
  GPtrArray *devices;       /* of char*: each device with a host side, its host
                               node and iothread, in words (not a holding) */
  GArray *resident;         /* of QpNodeAmount: MiB of ordinary memory its
                               QEMU has on each node, as its keeper last
                               measured (not a holding: what of the claim is
                               no longer outstanding) */
  /* Where it was started: the host nodes (--hostnodes) and the CPUs (the
   * launcher's affinity and cpuset, --affinity) it must stay inside, empty
   * when it may go anywhere; a move never leaves them (not a holding). */
  hwloc_bitmap_t started_nodes, started_cpus;
  /* The host reserve it was started with (reserve-mib, node-reserve-mib:
   * its config group's, QEMU_PIN_*'s or the command line's), of
   * QpNodeAmount: the nodes where it is not 0; empty when it is 0 on every
   * node, or not known (an older record). Its keeper plans a move with it
   * (not a holding). */
  GArray *started_reserve;
  /* Not in the record: QEMU's resident set (/proc/PID/stat) as the reader
   * found it live, the most its resident can be; 0 when not known. */
  guint64 qemu_rss_mib;
} QpClaim;

QpClaim *qp_claim_new(void);
/* A deep copy of CLAIM, what the reader noted (qemu_rss_mib) included. */
QpClaim *qp_claim_copy(const QpClaim *claim);
void qp_claim_free(QpClaim *claim);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QpClaim, qp_claim_free)

/* A live record of a shared ledger that does not count: its owner's claim
 * is more than a VM of its own holds (topology/ledger/trust.h). */
typedef struct {
  char *file;   /* the record file's path */
  guint owner;  /* the uid that owns it */
  char *reason; /* one line */
} QpIgnoredRecord;

typedef struct {
  GPtrArray *claims;            /* of QpClaim, live records */
  hwloc_bitmap_t blocked_nodes; /* nodes held whole (corrupt records) */
  GPtrArray *warnings;          /* of char*, shown on every plan */
  guint n_stale;      /* records of VMs that are gone, left for their owner */
  guint n_unreadable; /* records that could not be read, holding nodes */
  GPtrArray *ignored; /* of QpIgnoredRecord: live, but not counted */
} QpClaims;

QpClaims *qp_claims_new(void);
void qp_claims_free(QpClaims *claims);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QpClaims, qp_claims_free)

/* Takes out of CLAIMS the live record of the VM that UUID (its -uuid, or a
 * record id) or, when that finds none, NAME (-name) names (either may be
 * NULL; a name matches only a record without a -uuid, or when UUID is
 * NULL), and returns it (the caller frees it); NULL when none matches. *BY
 * (may be NULL) says what matched: "uuid", "id" or "name". For `plan` of a
 * running VM's own command line: a launch always counts every record. */
QpClaim *qp_claims_take_vm(QpClaims *claims, const char *uuid, const char *name,
                           const char **by);

G_END_DECLS
