/* What the planner's tests on hand-built hosts share (test-plan*.c): a
 * small builder, so that every case states its host in a few lines, seed
 * 000's hosts, requests, options, claims, the plan checks, and the
 * recorded hosts of tests/data/topologies. */
#pragma once

#include "topology/ledger/ledger.h"
#include "topology/plan/capacity.h"
#include "topology/plan/claim.h"
#include "topology/plan/plan.h"
#include "topology/status/status.h"

QpHost *host_new(guint n_nodes, guint64 mem_mib, guint remote_distance);

/* A core on NODE with PUs PU0 and (if >= 0) PU1. */
void host_core(QpHost *h, int node, int package, int kind, int pu0, int pu1);

void host_done(QpHost *h);

void host_free(QpHost *h);

typedef QpHost TestHost;

G_DEFINE_AUTOPTR_CLEANUP_FUNC(TestHost, host_free)

/* Seed 000's host, AMD EPYC 7351P: node N = CPUs 4N..4N+3 and
 * 16+4N..16+4N+3, CPU c and c+16 are SMT siblings, SLIT 10/16. MEM gives the
 * node sizes (NULL: 16384 MiB each). */
QpHost *epyc(const guint64 *mem);

/* 2-socket Intel, one node per socket, 8 cores each, siblings n and n+16. */
QpHost *intel_2s(void);

/* Hybrid: 4 P-cores with 2 threads (CPUs 0-7, kind 1, most performant)
 * and 12 E-cores (CPUs 8-19, kind 0). */
QpHost *hybrid(void);

/* ---- Request and option helpers ----------------------------------------- */

hwloc_bitmap_t list(const char *text);

QpRequest *request(guint vcpus, guint64 mem_mib);

/* N guest nodes, each with VCPUS_EACH consecutive vCPUs and MEM_EACH MiB. */
void request_vnuma(QpRequest *r, guint n, guint vcpus_each, guint64 mem_each);

typedef struct {
  QpPlacementOptions o;
} Opts;

void opts_free(Opts *o);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(Opts, opts_free)

Opts *opts_new(QpMode mode, const char *affinity);

QpClaim *claim_add(QpClaims *claims, const char *id);

void claim_mem(QpClaim *c, int node, guint64 mib);

void assert_set(hwloc_const_bitmap_t set, const char *expected);

void assert_vcpu(const QpPlan *p, guint v, const char *expected);

guint64 claimed_on(const QpPlan *p, int node);

guint load_on(const QpPlan *p, int node);

gboolean has_text(GPtrArray *lines, const char *needle);

/* Every error is one line and names what fell short. */
void assert_nofit(GError *error, const char *needle);

QpPlan *plan_ok(const QpHost *h, const QpClaims *c, const QpRequest *r,
                const Opts *o);

/* A plan that must be refused, with one line that names NEEDLE. */
void plan_refused(const QpHost *h, const QpClaims *c, const QpRequest *r,
                  const Opts *o, const char *needle);

/* ---- Seed 000 ------------------------------------------------------------
 *
 * Guest: sockets=4,cores=2,numa=1,memory=8192 -> 4 guest nodes of 2 vCPUs
 * (vCPUs 2k,2k+1 on guest node k) and 2048 MiB each; affinity
 * 0,1,4,5,8,9,12,13 = 2 physical cores per host node, no SMT siblings.
 * "With explicit hostnodes": guest node k has host-nodes=k,policy=bind. */

QpRequest *seed_request(gboolean explicit_hostnodes);

#define SEED_AFFINITY "0,1,4,5,8,9,12,13"

/* ---- Devices ------------------------------------------------------------ */

void add_pci(QpHost *h, const char *bdf, int node);

/* ---- Recorded hosts (tests/data/topologies, loaded by topology/host/) -----
 */

QpHost *recorded(const char *name);

/* Seed 000 on the recorded EPYC 7351P, whose nodes have the seed's own
 * sizes (15891, 16124, 16124, 16123 MB): CHECK (a mode's seed check)
 * without and with explicit host-nodes, as on the hand-built host. */
void check_recorded_seed(void (*check)(const QpHost *h,
                                       gboolean explicit_hostnodes));
