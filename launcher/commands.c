#include <glib.h>

#include "launcher/commands.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launcher/front/front.h"

#include "launcher/edge.h"
#include "launcher/launch.h"
#include "launcher/log.h"
#include "launcher/move.h"
#include "launcher/options.h"
#include "launcher/rebalance.h"
#include "launcher/qemu/args.h"
#include "launcher/qemu/daemonize.h"
#include "launcher/qemu/vm-ids.h"
#include "topology/base/json.h"
#include "topology/host/host.h"
#include "topology/ledger/ledger.h"
#include "topology/status/status.h"

/* ---- Output -------------------------------------------------------------- */

static void
print_json(JsonNode *node)
{
  g_autofree char *text = json_to_string(node, TRUE);
  qp_print("%s\n", text);
}

/* `plan` where nothing is planned, in mode none (QEMU's command line is
 * not read) or for a line a launch passes to QEMU as it is (PASSTHROUGH:
 * help, a version or a probe, -machine none): only the mode and why (see
 * docs/plan-schema.md). */
static void
print_plan_none(const QpOptions *opts, gboolean passthrough)
{
  const char *reason =
      passthrough ? "not a VM (help, a version or -machine none, as "
                    "orchestrators probe QEMU): QEMU runs as it is, nothing "
                    "is planned or claimed"
                  : "mode none: QEMU runs as it would without qemu-pin; "
                    "its command line is not read";
  if (opts->human) {
    qp_print("mode            none\n\nreasons:\n  - %s\n", reason);
    return;
  }
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "mode");
  qp_json_add_string_value(b, "none");
  json_builder_set_member_name(b, "reasons");
  json_builder_begin_array(b);
  qp_json_add_string_value(b, reason);
  json_builder_end_array(b);
  json_builder_set_member_name(b, "warnings");
  json_builder_begin_array(b);
  json_builder_end_array(b);
  json_builder_end_object(b);
  g_autoptr(JsonNode) node = json_builder_get_root(b);
  print_json(node);
}

/* ---- Commands ------------------------------------------------------------
 *
 * Each returns the exit status, or -1 with ERROR: qp_main() says it and
 * maps it to the exit status. */

/* `plan`, --dry-run: the plan (JSON, or a table with --human), nothing
 * launched. */
static int
cmd_plan(const QpOptions *opts, const QpQemuArgs *args, gboolean plan_only,
         GError **error)
{
  if (args == NULL || args->passthrough) {
    print_plan_none(opts, args != NULL);
    return 0;
  }
  g_autoptr(QpHost) host = NULL;
  g_autoptr(QpPlan) plan = qp_launch_plan(opts, args, plan_only, &host, error);
  if (plan == NULL)
    return -1;
  /* The table lists the warnings itself: each is said once. */
  for (guint i = 0; !opts->human && i < plan->warnings->len; i++)
    qp_warning("%s", (const char *)plan->warnings->pdata[i]);
  if (opts->human) {
    g_autofree char *text = qp_plan_to_human(plan, host);
    qp_print("%s", text);
  } else {
    g_autoptr(JsonNode) node = qp_plan_to_json(plan);
    print_json(node);
  }
  return 0;
}

static int
cmd_topology(QpOptions *opts, GError **error)
{
  g_autoptr(QpHost) host = qp_host_load(opts->topology, error);
  if (host == NULL)
    return -1;
  qp_log_init(opts->verbose);
  if (host->inconsistent != NULL)
    qp_info("%s", host->inconsistent);
  if (opts->json) {
    g_autoptr(JsonNode) node = qp_host_to_json(host);
    print_json(node);
  } else {
    g_autofree char *text = qp_host_to_text(host);
    qp_print("%s", text);
  }
  return 0;
}

/* status prints one format: text, --json, --metrics or --picture (of a
 * format it draws); else bad usage, said before anything is read. */
static gboolean
status_one_format(const QpOptions *opts, GError **error)
{
  const char *given[3];
  guint n = 0;
  if (opts->json)
    given[n++] = "--json";
  if (opts->metrics)
    given[n++] = "--metrics";
  if (opts->picture != NULL) {
    GError *local = NULL;
    if (!qp_status_picture_format_known(opts->picture, &local)) {
      g_set_error_literal(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
                          local->message);
      g_error_free(local);
      return FALSE;
    }
    given[n++] = "--picture";
  }
  if (n < 2)
    return TRUE;
  g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
              "status: %s and %s are different outputs; expected one of "
              "--json, --metrics, --picture",
              given[0], given[1]);
  return FALSE;
}

static int
cmd_status(QpOptions *opts, GError **error)
{
  if (!status_one_format(opts, error))
    return -1;
  g_autoptr(QpHost) host = qp_host_load_full(opts->topology, FALSE, error);
  if (host == NULL)
    return -1;
  g_autofree char *dir = qp_launch_state_dir(opts);
  /* Records of VMs that are gone count for nothing; reading removes the
   * caller's own, --prune every one it may (root: all). */
  g_autoptr(QpClaims) claims = opts->prune
                                   ? qp_ledger_prune_claims(dir, host, error)
                                   : qp_ledger_read_claims(dir, host, error);
  if (claims == NULL)
    return -1;
  if (opts->picture != NULL) {
    if (!qp_status_picture(opts->topology, claims, opts->picture, error))
      return -1;
    guint n = claims->claims->len;
    qp_print("qemu-pin: drew %u VM%s on the host in %s\n", n, n == 1 ? "" : "s",
             opts->picture);
    return 0;
  }
  if (opts->metrics) {
    g_autofree char *text =
        qp_status_to_metrics(host, claims, &opts->placement);
    qp_print("%s", text);
    return 0;
  }
  /* What `rebalance` would move now, planned as it plans. */
  g_autoptr(QpRebalance) r =
      qp_rebalance_live(opts, host, claims, NULL, QP_REBALANCE_COOLDOWN_S,
                        FALSE, NULL, NULL, error);
  if (r == NULL)
    return -1;
  if (opts->json) {
    g_autoptr(JsonNode) node =
        qp_status_to_json(host, claims, &opts->placement);
    qp_status_json_add_moves(node, r->moves);
    print_json(node);
  } else {
    g_autofree char *text = qp_status_to_text(host, claims, &opts->placement);
    g_autofree char *moves = qp_status_moves_to_text(r->moves, claims);
    qp_print("%s%s", text, moves);
  }
  return 0;
}

static int run_command(QpOptions *opts, int argc, char **argv, GError **error);

/* Whether the command CMD's own options (ARGV[2..]) ask for help: up to
 * "--", and for the commands that take a QEMU command line (plan,
 * rebalance) up to the first word that is no option, where QEMU's
 * command line may begin (and what follows is QEMU's own). A value given
 * apart ("--mode balanced") ends that look early: such a line says what
 * it does wrong in one line instead. */
static gboolean
command_wants_help(const char *cmd, int argc, char **argv)
{
  gboolean qemu_after =
      strcmp(cmd, "plan") == 0 || strcmp(cmd, "rebalance") == 0;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0)
      return FALSE;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
      return TRUE;
    if (a[0] != '-' && qemu_after)
      return FALSE;
  }
  return FALSE;
}

/* The settings of the command line (by name, as in opts->given) that
 * topology and status take; NULL: any (rebalance takes the VM's placement
 * options). status plans nothing of its own: of the placement it takes
 * only the host's reserve, which its free and available memory count. */
static const char *const *
command_settings(const char *cmd)
{
  static const char *const topology[] = {"topology", "verbose", NULL};
  static const char *const status[] = {
      "state-dir",        "config",  "topology", "reserve-mib",
      "node-reserve-mib", "verbose", NULL};
  if (strcmp(cmd, "topology") == 0)
    return topology;
  if (strcmp(cmd, "status") == 0)
    return status;
  return NULL;
}

gboolean
qp_command_options_only(const char *cmd, const QpOptions *opts, GError **error)
{
  gboolean topology = strcmp(cmd, "topology") == 0;
  gboolean rebalance = strcmp(cmd, "rebalance") == 0;
  const char *const *takes = command_settings(cmd);
  const char *name = NULL;
  if (opts->human)
    name = "human";
  else if ((topology || rebalance) &&
           (opts->metrics || opts->prune || opts->picture))
    name = opts->metrics ? "metrics" : opts->prune ? "prune" : "picture";
  else if (!topology && !rebalance &&
           g_hash_table_contains(opts->given, "dry-run"))
    name = "dry-run";
  GHashTableIter it;
  gpointer key;
  g_hash_table_iter_init(&it, opts->given);
  while (name == NULL && takes != NULL &&
         g_hash_table_iter_next(&it, &key, NULL))
    if (!g_strv_contains((const char *const *)takes, key))
      name = key;
  if (name == NULL)
    return TRUE;
  g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
              "option '--%s' is not for qemu-pin %s%s: see qemu-pin --help",
              name, cmd,
              topology    ? " (it takes --json, --topology and -v)"
              : rebalance ? " (it takes --dry-run, --json, --cooldown, "
                            "--state-dir, -v and the VM's placement options)"
                          : " (it takes --json, --metrics, --prune, --picture, "
                            "--state-dir, --config, --topology, --reserve-mib, "
                            "--node-reserve-mib and -v)");
  return FALSE;
}

static const QpEdge full_edge = {cmd_plan, run_command, qp_make_room};

/* qemu-pin [topology|status|plan|move|rebalance] [OPTIONS] [--] [QEMU_BINARY
 * ARGS...] */
static int
run_command(QpOptions *opts, int argc, char **argv, GError **error)
{
  const char *cmd = argc > 1 ? argv[1] : NULL;
  if (cmd == NULL || !qp_front_is_command(cmd))
    return qp_edge_qemu_command(&full_edge, opts, argc, argv, 0, error);
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 ||
      command_wants_help(cmd, argc, argv)) {
    qp_print("%s", qp_options_help());
    return 0;
  }
  if (strcmp(cmd, "plan") == 0)
    return qp_edge_qemu_command(&full_edge, opts, argc, argv, 1, error);
  if (strcmp(cmd, "move") == 0)
    return qp_cmd_move(opts, argc - 1, argv + 1, error);
  if (strcmp(cmd, "rebalance") == 0)
    return qp_cmd_rebalance(opts, argc - 1, argv + 1, error);
  if (strcmp(cmd, "--version") == 0) {
    qp_print("qemu-pin %s\n", QP_VERSION);
    return 0;
  }
  /* topology, status */
  int qemu_index;
  if (!qp_options_parse_cli(opts, argc - 1, argv + 1, FALSE, &qemu_index,
                            error) ||
      !qp_command_options_only(cmd, opts, error) ||
      !qp_options_parse_env(opts, error))
    return -1;
  if (strcmp(cmd, "topology") == 0)
    return cmd_topology(opts, error);
  return qp_options_load_config(opts, NULL, error) ? cmd_status(opts, error)
                                                   : -1;
}

int
qp_main(int argc, char **argv, const struct timespec *t0)
{
  return qp_edge_main(argc, argv, t0, &full_edge);
}
