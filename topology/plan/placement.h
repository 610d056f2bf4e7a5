/* What the user asks of qemu-pin: the placement mode and its options
 * (--mode, --policy, --strategy, --smt, --device-locality, --vnuma,
 * --affinity, --hostnodes and the host reserve). */
#pragma once

#include <glib.h>
#include <hwloc.h>

#include "topology/base/cpulist.h"
#include "topology/base/names.h"
#include "topology/ledger/claims.h"

G_BEGIN_DECLS

typedef enum {
  QP_POLICY_DEFAULT, /* not set: qemu-pin chooses (bind) */
  QP_POLICY_BIND,
  QP_POLICY_PREFERRED,
  QP_POLICY_INTERLEAVE,
} QpPolicy;

typedef enum { QP_STRATEGY_SPREAD, QP_STRATEGY_PACK } QpStrategy;
typedef enum { QP_SMT_PREFER, QP_SMT_STRICT } QpSmt;
typedef enum {
  QP_DEVLOC_PREFERRED,
  QP_DEVLOC_REQUIRED,
  QP_DEVLOC_IGNORE,
} QpDeviceLocality;

const char *qp_policy_name(QpPolicy policy); /* "bind", ... ("default") */
gboolean qp_policy_parse(const char *text, QpPolicy *out);
const char *qp_strategy_name(QpStrategy strategy);
gboolean qp_strategy_parse(const char *text, QpStrategy *out);
const char *qp_smt_name(QpSmt smt);
gboolean qp_smt_parse(const char *text, QpSmt *out);
const char *qp_device_locality_name(QpDeviceLocality d);
gboolean qp_device_locality_parse(const char *text, QpDeviceLocality *out);

typedef struct {
  QpMode mode;
  QpStrategy strategy;
  QpPolicy policy; /* memory policy for bindings qemu-pin makes */
  QpSmt smt;
  QpDeviceLocality device_locality;
  gboolean vnuma;
  hwloc_bitmap_t affinity;  /* host CPUs to stay inside, NULL = all */
  hwloc_bitmap_t hostnodes; /* host nodes to stay inside, NULL = all */
  guint64 reserve_mib;      /* host reserve on each node */
  GArray *node_reserve;     /* of QpNodeAmount: per-node overrides, or NULL */
} QpPlacementOptions;

void qp_placement_options_init(QpPlacementOptions *opts);
void qp_placement_options_clear(QpPlacementOptions *opts);

G_END_DECLS
