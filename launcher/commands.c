#include <glib.h>

#include "launcher/commands.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launcher/front/front.h"

#include "launcher/launch.h"
#include "launcher/log.h"
#include "launcher/move.h"
#include "launcher/options.h"
#include "launcher/rebalance.h"
#include "launcher/qemu/args.h"
#include "launcher/qemu/daemonize.h"
#include "launcher/qemu/vm-ids.h"
#include "topology/host/host.h"
#include "topology/ledger/ledger.h"
#include "topology/status/status.h"

char *
qp_find_real_qemu(const char *argv0, GError **error)
{
  int no_self = 0;
  char *found = qp_front_find_qemu(argv0, g_getenv("PATH"), &no_self);
  if (found != NULL)
    return found;
  if (no_self) {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "cannot stat /proc/self/exe: %s", g_strerror(errno));
    return NULL;
  }
  g_autofree char *base = g_path_get_basename(argv0);
  g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
              "no real QEMU binary named '%s' on PATH other than qemu-pin "
              "itself: set QEMU_PIN_QEMU or the config key 'qemu'",
              base);
  return NULL;
}

/* ---- Output -------------------------------------------------------------- */

static void
print_json(JsonNode *node)
{
  g_autofree char *text = json_to_string(node, TRUE);
  g_print("%s\n", text);
}

/* `plan` in mode none, where QEMU's command line is not read: only the
 * mode and why (see docs/plan-schema.md). */
static void
print_plan_none(const QpOptions *opts)
{
  const char *reason = "mode none: QEMU runs as it would without qemu-pin; "
                       "its command line is not read";
  if (opts->human) {
    g_print("mode            none\n\nreasons:\n  - %s\n", reason);
    return;
  }
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "mode");
  json_builder_add_string_value(b, "none");
  json_builder_set_member_name(b, "reasons");
  json_builder_begin_array(b);
  json_builder_add_string_value(b, reason);
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
  g_autoptr(QpHost) host = NULL;
  g_autoptr(QpPlan) plan = qp_launch_plan(opts, args, plan_only, &host, error);
  if (plan == NULL)
    return -1;
  /* The table lists the warnings itself: each is said once. */
  for (guint i = 0; !opts->human && i < plan->warnings->len; i++)
    qp_warning("%s", (const char *)plan->warnings->pdata[i]);
  if (opts->human) {
    g_autofree char *text = qp_plan_to_human(plan, host);
    g_print("%s", text);
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
    g_print("%s", text);
  }
  return 0;
}

/* status prints one format: text, --json, --metrics or --picture. */
static gboolean
status_one_format(const QpOptions *opts, GError **error)
{
  const char *given[3];
  guint n = 0;
  if (opts->json)
    given[n++] = "--json";
  if (opts->metrics)
    given[n++] = "--metrics";
  if (opts->picture != NULL)
    given[n++] = "--picture";
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
    g_print("qemu-pin: drew %u VM%s on the host in %s\n", n, n == 1 ? "" : "s",
            opts->picture);
    return 0;
  }
  if (opts->metrics) {
    g_autofree char *text =
        qp_status_to_metrics(host, claims, &opts->placement);
    g_print("%s", text);
    return 0;
  }
  /* What `rebalance` would move now, planned as it plans. */
  g_autoptr(QpRebalance) r = qp_rebalance_live(
      opts, host, claims, NULL, QP_REBALANCE_COOLDOWN_S, FALSE, error);
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
    g_print("%s%s", text, moves);
  }
  return 0;
}

/* QEMU exactly as the caller asked (help, probes, mode none): returns only
 * if the exec failed. */
static int
exec_straight(const char *binary, const char *argv0, int argc, char **argv,
              GError **error)
{
  g_autofree char **full = g_new0(char *, (gsize)argc + 2);
  full[0] = (char *)argv0;
  for (int i = 0; i < argc; i++)
    full[i + 1] = argv[i];
  qp_exec(binary, full, error);
  return -1;
}

/* Resolves settings, parses the QEMU command and launches or plans. The
 * mode comes first: in mode none QEMU runs as the caller asked, whatever
 * qemu-pin would have made of its command line. */
static int
run_qemu(QpOptions *opts, const char *binary, const char *argv0, int argc,
         char **argv, gboolean plan_only, GError **error)
{
  g_autofree char *dropped = NULL;
  g_auto(GStrv) safe = qp_argv_daemonize_safe((guint)argc, argv, &dropped);
  if (safe != NULL)
    argv = safe;
  g_autoptr(QpVmIds) vm = qp_vm_ids_from_argv((guint)argc, argv);
  if (!qp_options_parse_env(opts, error) ||
      !qp_options_load_config(opts, vm, error))
    return -1;
  qp_log_init(opts->verbose);
  qp_log_set_vm(vm->name);
  if (dropped != NULL)
    qp_info("-daemonize: prealloc-context taken off memory backend%s %s "
            "(QEMU starts a thread-context's thread before its fork, and "
            "the daemon would wait for it forever)",
            strchr(dropped, ',') ? "s" : "", dropped);
  g_autoptr(GError) local = NULL;
  g_autoptr(QpQemuArgs) args = qp_launch_read(opts, (guint)argc, argv, &local);
  if (args == NULL && local == NULL) {
    if (!plan_only && !opts->dry_run)
      return exec_straight(binary, argv0, argc, argv, error);
    print_plan_none(opts);
    return 0;
  }
  if (args == NULL) {
    g_propagate_error(error, g_steal_pointer(&local));
    return -1;
  }
  if (args->passthrough && !plan_only)
    return exec_straight(binary, argv0, argc, argv, error);
  if (plan_only || opts->dry_run)
    return cmd_plan(opts, args, plan_only, error);
  return qp_launch(opts, binary, argv0, args, error);
}

/* Installed or linked under a QEMU binary's name: every argument is
 * QEMU's; qemu-pin's settings come from the environment and config. */
static int
run_drop_in(QpOptions *opts, int argc, char **argv, GError **error)
{
  /* The config may name the binary: read it before looking on PATH. */
  if (!qp_options_parse_env(opts, error) ||
      !qp_options_load_config(opts, NULL, error))
    return -1;
  g_autofree char *real =
      opts->qemu ? g_strdup(opts->qemu) : qp_find_real_qemu(argv[0], error);
  if (real == NULL)
    return -1;
  return run_qemu(opts, real, argv[0], argc - 1, argv + 1, FALSE, error);
}

/* qemu-pin [topology|status|plan|move|rebalance] [OPTIONS] [--] [QEMU_BINARY
 * ARGS...] */
static int
run_command(QpOptions *opts, int argc, char **argv, GError **error)
{
  const char *cmd = argc > 1 ? argv[1] : NULL;
  int shift = 0;
  if (cmd != NULL && (strcmp(cmd, "topology") == 0 ||
                      strcmp(cmd, "status") == 0 || strcmp(cmd, "plan") == 0))
    shift = 1;
  if (cmd != NULL && (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0)) {
    g_print("%s", qp_options_help());
    return 0;
  }
  if (cmd != NULL && strcmp(cmd, "move") == 0)
    return qp_cmd_move(opts, argc - 1, argv + 1, error);
  if (cmd != NULL && strcmp(cmd, "rebalance") == 0)
    return qp_cmd_rebalance(opts, argc - 1, argv + 1, error);
  if (cmd != NULL && strcmp(cmd, "--version") == 0) {
    g_print("qemu-pin %s\n", QP_VERSION);
    return 0;
  }

  int qemu_index;
  gboolean takes_qemu = shift == 0 || strcmp(cmd, "plan") == 0;
  if (!qp_options_parse_cli(opts, argc - shift, argv + shift, takes_qemu,
                            &qemu_index, error))
    return -1;
  qemu_index += shift;

  if (shift == 1 && strcmp(cmd, "topology") == 0)
    return qp_options_parse_env(opts, error) ? cmd_topology(opts, error) : -1;
  if (shift == 1 && strcmp(cmd, "status") == 0)
    return qp_options_parse_env(opts, error) &&
                   qp_options_load_config(opts, NULL, error)
               ? cmd_status(opts, error)
               : -1;
  if (qemu_index >= argc) {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
                "no QEMU binary given: usage: qemu-pin [OPTIONS] "
                "[--] QEMU_BINARY [QEMU_ARGS...] (see --help)");
    return -1;
  }
  return run_qemu(opts, argv[qemu_index], argv[qemu_index],
                  argc - qemu_index - 1, argv + qemu_index + 1, shift == 1,
                  error);
}

/* The front's decision first (launcher/front/front.h): help, probes and
 * mode none run QEMU straight, as they do before this program is loaded. */
static int
run_straight(int argc, char **argv, GError **error)
{
  QpFrontExec e;
  if (!qp_front_decide(argc, argv, environ, &e))
    return 0;
  qp_exec(e.binary, e.argv, error);
  qp_front_exec_clear(&e);
  return -1;
}

/* The edge: the only place that says an error and chooses the exit status
 * (qp_error_exit_status()). */
int
qp_main(int argc, char **argv, const struct timespec *t0)
{
  qp_timing_start(t0);
  qp_timing("loaded");
  g_autoptr(GError) error = NULL;
  QpOptions opts;
  qp_options_init(&opts);
  qp_log_init(0);
  g_autofree char *self = g_path_get_basename(argv[0]);
  int rc = run_straight(argc, argv, &error);
  if (rc == 0 && error == NULL)
    rc = qp_is_qemu_name(self) ? run_drop_in(&opts, argc, argv, &error)
                               : run_command(&opts, argc, argv, &error);
  if (rc < 0) {
    qp_error("%s", error->message);
    rc = qp_error_exit_status(error);
  }
  qp_options_clear(&opts);
  return rc;
}
