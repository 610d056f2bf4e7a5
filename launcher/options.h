/* qemu-pin's own settings, from four sources in order of precedence:
 * command line, environment (QEMU_PIN_*), the VM's group of the config file
 * ([name:NAME], [uuid:UUID] or [id:N]), and the config's [defaults] group. */
#pragma once

#include <glib.h>

#include "launcher/front/front.h"
#include "launcher/qemu/vm-ids.h"
#include "qp-error.h"
#include "topology/plan/plan.h"

G_BEGIN_DECLS

typedef struct {
  QpPlacementOptions placement;
  char *config; /* config file; NULL: the default, if it exists */
  gboolean config_explicit;
  char *state_dir; /* NULL: qp_state_dir_default() */
  char *qemu;      /* real QEMU binary (drop-in) */
  char *topology;  /* recorded hwloc XML instead of the live host */
  gboolean dry_run;
  gboolean make_room;        /* launch: rebalance first (qp_make_room()) */
  guint64 rebalance_min_mib; /* rebalance: the least gain worth moving */
  gboolean human;            /* plan: readable table instead of JSON */
  gboolean json;             /* topology/status: JSON */
  gboolean prune;            /* status --prune */
  gboolean metrics;          /* status --metrics: Prometheus text */
  char *picture;             /* status --picture=FILE */
  int verbose;
  guint qmp_timeout_ms;   /* every QMP reply */
  guint start_timeout_ms; /* QEMU's greeting */
  /* Which settings the command line and environment gave (by name), so
   * that the config file does not override them. */
  GHashTable *given;
} QpOptions;

void qp_options_init(QpOptions *opts);
void qp_options_clear(QpOptions *opts);

/* Applies the setting NAME (e.g. "mode", "affinity") = VALUE from ORIGIN
 * ("--mode", "QEMU_PIN_MODE", "FILE:LINE: mode"). */
gboolean qp_options_set(QpOptions *opts, const char *name, const char *value,
                        const char *origin, GError **error);

/* Splits ARGV (from index 1) into qemu-pin's options and the QEMU command:
 * parses the options into OPTS and returns the index of the QEMU binary in
 * ARGV (ARGC when there is none). */
gboolean qp_options_parse_cli(QpOptions *opts, int argc, char **argv,
                              gboolean allow_qemu, int *qemu_index,
                              GError **error);

/* Environment twins (QEMU_PIN_MODE, ...) for settings the command line did
 * not give. */
gboolean qp_options_parse_env(QpOptions *opts, GError **error);

/* The config file: [defaults], then the VM's group matched by VM's -name,
 * -uuid or -id (VM may be NULL), for settings not given above. A missing
 * default config file is fine; a missing explicit one is an error. */
gboolean qp_options_load_config(QpOptions *opts, const QpVmIds *vm,
                                GError **error);

/* The --help text. */
const char *qp_options_help(void);

G_END_DECLS
