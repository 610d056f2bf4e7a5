/* `qemu-pin rebalance` (rebalance.h): the command's edge. The moves are
 * planned by qp_rebalance_compute() (topology/plan/rebalance.h) from the
 * live records and, with a command line, the request `plan` would make of
 * it; each move is made by the VM's keeper exactly as `qemu-pin move`
 * makes it (qp_move_ask()). */
#include "launcher/rebalance.h"

#include <stdlib.h>
#include <string.h>

#include "launcher/edge.h"
#include "launcher/launch.h"
#include "launcher/log.h"
#include "launcher/move.h"
#include "launcher/qemu/args.h"
#include "topology/host/host.h"
#include "topology/ledger/ledger.h"
#include "topology/plan/rebalance-gate.h"
#include "topology/plan/rebalance.h"
#include "topology/status/status.h"

/* Takes --cooldown=SECONDS (or --cooldown SECONDS) out of ARGV, before a
 * "--" (QEMU's options never start with two dashes); the rest in *OUT
 * (ARGV[0] first, the strings ARGV's), the count returned. */
static int
take_cooldown(int argc, char **argv, char ***out, gint64 *cooldown,
              GError **error)
{
  *cooldown = QP_REBALANCE_COOLDOWN_S;
  char **rest = g_new0(char *, (gsize)argc + 1);
  int n = 0;
  gboolean past = FALSE;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = NULL;
    if (!past && strcmp(a, "--") == 0)
      past = TRUE;
    else if (!past && strncmp(a, "--cooldown=", 11) == 0)
      v = a + 11;
    else if (!past && strcmp(a, "--cooldown") == 0) {
      if (i + 1 >= argc) {
        g_free(rest);
        g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
                    "rebalance: option '--cooldown' needs a value: SECONDS");
        return -1;
      }
      v = argv[++i];
    }
    if (v == NULL) {
      rest[n++] = argv[i];
      continue;
    }
    char *end = NULL;
    guint64 s = g_ascii_strtoull(v, &end, 10);
    if (!g_ascii_isdigit(*v) || *end != '\0' || s > G_MAXINT32) {
      g_free(rest);
      g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
                  "rebalance: --cooldown '%s' is not valid: expected "
                  "seconds (0: no cooldown)",
                  v);
      return -1;
    }
    *cooldown = (gint64)s;
  }
  *out = rest;
  return n;
}

/* The request for the VM on QEMU's command line ARGV (ARGC words, the
 * binary excluded), read as `plan` reads it: the same settings, the same
 * parser; the host and the ledger it is planned on in HOST_OUT and the
 * return value. */
static QpClaims *
read_request(QpOptions *opts, int argc, char **argv, QpQemuArgs **args_out,
             QpHost **host_out, GError **error)
{
  g_autofree char *dropped = NULL;
  g_auto(GStrv) safe = NULL;
  if (!qp_edge_settings(opts, argc, &argv, &safe, &dropped, error))
    return NULL;
  g_autoptr(GError) local = NULL;
  g_autoptr(QpQemuArgs) args = qp_launch_read(opts, (guint)argc, argv, &local);
  if (local != NULL) {
    g_propagate_error(error, g_steal_pointer(&local));
    return NULL;
  }
  if (args == NULL || args->passthrough) {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
                "rebalance: %s: there is no VM to make room for; expected a "
                "QEMU command line that qemu-pin places",
                args == NULL ? "mode none" : "QEMU's help or a probe");
    return NULL;
  }
  qp_launch_say_read(args);
  g_autoptr(QpClaim) own = NULL;
  const char *by = NULL;
  QpClaims *claims =
      qp_launch_read_ledger(opts, args, TRUE, host_out, &own, &by, error);
  if (claims != NULL)
    *args_out = g_steal_pointer(&args);
  return claims;
}

/* What each record allows, from what the record says. It does not say
 * whether the caller pinned the VM's threads or chose its backends' host
 * nodes, nor the --hostnodes and --affinity it was started with: those the
 * VM's keeper checks when it is asked to move, and refuses. A record of
 * mode none, or one that mode auto placed best effort, gets none: never
 * moved. */
static GArray *
vms_of(const QpClaims *claims)
{
  GArray *vms = g_array_new(FALSE, TRUE, sizeof(QpRebalanceVm));
  for (guint i = 0; i < claims->claims->len; i++) {
    const QpClaim *c = claims->claims->pdata[i];
    if ((c->mode != QP_MODE_BALANCED && c->mode != QP_MODE_NUMA &&
         c->mode != QP_MODE_ONE_TO_ONE) ||
        c->best_effort)
      continue;
    QpRebalanceVm v = {0};
    v.id = c->id;
    v.vfio = qp_claim_has_vfio(c);
    v.moved_at = c->moved_at;
    g_array_append_val(vms, v);
  }
  return vms;
}

static const QpClaim *
claim_by_id(const QpClaims *claims, const char *id)
{
  for (guint i = 0; i < claims->claims->len; i++) {
    const QpClaim *c = claims->claims->pdata[i];
    if (g_strcmp0(c->id, id) == 0)
      return c;
  }
  return NULL;
}

/* HELD: the moves fell short of rebalance-min-mib and none is made. */
static JsonNode *
to_json(const QpRebalance *r, gboolean with_request, gboolean held)
{
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "moves");
  json_builder_add_value(b, qp_moves_to_json(held ? NULL : r->moves));
  json_builder_set_member_name(b, "held-mib");
  json_builder_add_int_value(b, held ? (gint64)qp_rebalance_gain(r) : 0);
  json_builder_set_member_name(b, "plan");
  if (with_request && r->plan != NULL)
    json_builder_add_value(b, qp_plan_to_json(r->plan));
  else
    json_builder_add_null_value(b);
  json_builder_set_member_name(b, "kept");
  json_builder_begin_array(b);
  for (guint i = 0; i < r->kept->len; i++)
    json_builder_add_string_value(b, r->kept->pdata[i]);
  json_builder_end_array(b);
  json_builder_end_object(b);
  return json_builder_get_root(b);
}

static const char *
name_of(const QpClaims *claims, const char *id)
{
  const QpClaim *c = claim_by_id(claims, id);
  return c != NULL && c->name != NULL ? c->name : "-";
}

/* The plan's summary line: where the given VM goes after the moves. */
static void
print_plan_line(const QpRebalance *r)
{
  g_autofree char *before =
      r->req_nodes_before > 0
          ? g_strdup_printf("%u node%s", r->req_nodes_before,
                            r->req_nodes_before == 1 ? "" : "s")
          : g_strdup("does not fit");
  if (r->plan == NULL) {
    g_print("qemu-pin: plan: the VM does not fit even after the moves "
            "(without them: %s)\n",
            before);
    return;
  }
  g_autofree char *nodes = qp_list_format(r->plan->host_nodes);
  g_print("qemu-pin: plan: mode %s on host node%s %s (%u node%s; without "
          "the moves: %s)\n",
          qp_mode_name(r->plan->mode), r->req_nodes_after == 1 ? "" : "s",
          nodes, r->req_nodes_after, r->req_nodes_after == 1 ? "" : "s",
          before);
}

static void
print_human(const QpRebalance *r, const QpClaims *claims, gboolean dry_run,
            gboolean with_request, guint64 held_below)
{
  if (dry_run && held_below == 0)
    for (guint i = 0; i < r->moves->len; i++) {
      const QpMove *m = r->moves->pdata[i];
      g_autofree char *from = qp_list_format(m->from);
      g_autofree char *to = qp_list_format(m->to);
      g_print("qemu-pin: rebalance would move VM %s (%s) from nodes %s to "
              "%s: %" G_GUINT64_FORMAT " MiB\n",
              name_of(claims, m->vm), m->vm, from, to, m->mib);
    }
  if (held_below > 0)
    g_print("qemu-pin: rebalance: no VM to move: the moves would bring "
            "%" G_GUINT64_FORMAT
            " MiB of spanning VMs onto one node, less than "
            "rebalance-min-mib %" G_GUINT64_FORMAT "\n",
            qp_rebalance_gain(r), held_below);
  else if (r->moves->len == 0)
    g_print("qemu-pin: rebalance: no VM to move\n");
  if (with_request)
    print_plan_line(r);
}

/* Makes R's moves in order, each by the VM's keeper; stops at the first
 * that fails, saying which and what was made before it. Each move made is
 * printed (PRINT: the keeper's answer, as `move` prints it; else one line
 * with -v) and counted in *MADE. */
static gboolean
make_moves(const QpOptions *opts, const QpRebalance *r, const QpClaims *claims,
           gboolean print, guint *made, GError **error)
{
  QpOptions quiet = *opts;
  quiet.json = FALSE;
  for (guint i = 0; i < r->moves->len; i++) {
    const QpMove *m = r->moves->pdata[i];
    g_autofree char *to = qp_list_format(m->to);
    const QpClaim *c = claim_by_id(claims, m->vm);
    g_autoptr(GError) local = NULL;
    g_autoptr(QpJv) reply =
        c != NULL ? qp_move_ask(c, to, QP_MOVE_DEFAULT_RATE_MIB, &local) : NULL;
    if (reply == NULL) {
      g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                  "rebalance: move %u of %u (VM %s to nodes %s) failed, "
                  "%s%s: %s",
                  i + 1, r->moves->len, m->vm, to,
                  i == 0 ? "no move made" : "the moves before it stay made",
                  i == 0 ? "" : " (qemu-pin status shows them)",
                  local != NULL ? local->message : "its record is gone");
      return FALSE;
    }
    (*made)++;
    g_autofree char *from = qp_list_format(m->from);
    if (print)
      qp_move_print_answer(&quiet, reply);
    else
      qp_info("moved VM %s (%s) from nodes %s to %s: %" G_GUINT64_FORMAT " MiB",
              name_of(claims, m->vm), m->vm, from, to, m->mib);
  }
  return TRUE;
}

QpRebalance *
qp_rebalance_live(const QpOptions *opts, const QpHost *host,
                  const QpClaims *claims, const QpRequest *req,
                  gint64 cooldown_s, gboolean room_only, GError **error)
{
  g_autoptr(GArray) vms = vms_of(claims);
  QpRebalanceOptions o = {
      .now = g_get_real_time() / G_USEC_PER_SEC,
      .cooldown_s = cooldown_s,
      .req = req,
      .opts = &opts->placement,
      .no_consolidate = room_only,
  };
  return qp_rebalance_compute(host, claims, (const QpRebalanceVm *)vms->data,
                              vms->len, &o, error);
}

gboolean
qp_make_room(const QpOptions *opts, const QpQemuArgs *args, const QpHost *host,
             const char *state_dir)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(QpClaims) claims = qp_ledger_read_claims(state_dir, host, &error);
  g_autoptr(QpRebalance) r =
      claims != NULL ? qp_rebalance_live(opts, host, claims, args->req,
                                         QP_REBALANCE_COOLDOWN_S, TRUE, &error)
                     : NULL;
  /* Not planned: the launch's own plan says why, in its words. */
  if (r == NULL)
    return FALSE;
  gboolean helps =
      r->plan != NULL && r->moves->len > 0 &&
      (r->req_nodes_before == 0 || r->req_nodes_after < r->req_nodes_before);
  if (!helps)
    return FALSE;
  qp_info("make-room: %u move%s (%" G_GUINT64_FORMAT
          " MiB) put this VM on %u node%s instead of %u",
          r->moves->len, r->moves->len == 1 ? "" : "s", r->mib,
          r->req_nodes_after, r->req_nodes_after == 1 ? "" : "s",
          r->req_nodes_before);
  guint made = 0;
  if (!make_moves(opts, r, claims, FALSE, &made, &error))
    qp_warning("make-room: %s; launching with the plan the host allows now",
               error->message);
  return made > 0;
}

int
qp_cmd_rebalance(QpOptions *opts, int argc, char **argv, GError **error)
{
  g_autofree char **words = NULL;
  gint64 cooldown = 0;
  int n = take_cooldown(argc, argv, &words, &cooldown, error);
  int qemu_index = 0;
  if (n < 0 || !qp_options_parse_cli(opts, n, words, TRUE, &qemu_index, error))
    return -1;
  g_autoptr(QpQemuArgs) args = NULL;
  g_autoptr(QpHost) host = NULL;
  g_autoptr(QpClaims) claims = NULL;
  if (qemu_index < n)
    claims = read_request(opts, n - qemu_index - 1, words + qemu_index + 1,
                          &args, &host, error);
  else if (qp_options_parse_env(opts, error) &&
           qp_options_load_config(opts, NULL, error)) {
    qp_log_init(opts->verbose);
    host = qp_host_load_full(opts->topology, FALSE, error);
    if (host != NULL) {
      g_autofree char *dir = qp_launch_state_dir(opts);
      claims = qp_ledger_read_claims(dir, host, error);
    }
  }
  if (claims == NULL)
    return -1;

  g_autoptr(QpRebalance) r =
      qp_rebalance_live(opts, host, claims, args != NULL ? args->req : NULL,
                        cooldown, FALSE, error);
  if (r == NULL)
    return -1;
  if (args != NULL && r->plan == NULL) {
    /* Said once, in the words `plan` would use. */
    g_autoptr(GError) why = NULL;
    g_autoptr(QpPlan) none =
        qp_plan_compute(host, r->after, args->req, &opts->placement, &why);
    (void)none; /* NULL: the VM does not fit, as r->plan said */
    qp_warning("rebalance: the VM does not fit even after the moves: %s",
               why != NULL ? why->message : "no plan");
  }
  for (guint i = 0; r->plan != NULL && i < r->plan->warnings->len; i++)
    qp_warning("%s", (const char *)r->plan->warnings->pdata[i]);
  /* The hysteresis (rebalance-min-mib) holds back moves that gain too
   * little; with a command line the moves make room and it does not apply. */
  guint64 held_below = args == NULL && r->moves->len > 0 &&
                               opts->rebalance_min_mib > 0 &&
                               !qp_rebalance_worth(r, opts->rebalance_min_mib)
                           ? opts->rebalance_min_mib
                           : 0;
  guint made = 0;
  if (!opts->dry_run && held_below == 0 &&
      !make_moves(opts, r, claims, !opts->json, &made, error))
    return -1;
  if (opts->json) {
    g_autoptr(JsonNode) node = to_json(r, args != NULL, held_below > 0);
    g_autofree char *text = json_to_string(node, TRUE);
    g_print("%s\n", text);
  } else
    print_human(r, claims, opts->dry_run, args != NULL, held_below);
  return 0;
}
