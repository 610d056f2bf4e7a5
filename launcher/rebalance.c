/* `qemu-pin rebalance` (rebalance.h): the command's edge. The moves are
 * planned by qp_rebalance_compute() (topology/plan/rebalance.h) from the
 * live records and, with a command line, the request `plan` would make of
 * it; each move is made by the VM's keeper exactly as `qemu-pin move`
 * makes it (qp_move_ask()). */
#include "launcher/rebalance.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "launcher/commands.h"
#include "launcher/keeper/migrate.h"
#include "launcher/edge.h"
#include "launcher/launch.h"
#include "launcher/log.h"
#include "launcher/move.h"
#include "launcher/qemu/args.h"
#include "launcher/qemu/memory.h"
#include "topology/base/json.h"
#include "topology/host/host.h"
#include "topology/ledger/ledger.h"
#include "topology/ledger/qemu-cmdline.h"
#include "topology/plan/rebalance-gate.h"
#include "topology/plan/rebalance.h"
#include "topology/status/status.h"
#include "topology/status/usage.h"

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

/* Moves are real: they are planned on this host, not a recorded one
 * (--topology, or QEMU_PIN_TOPOLOGY: checked once the settings are read). */
static gboolean
check_moves_host(const QpOptions *opts, GError **error)
{
  if (opts->topology == NULL || opts->dry_run)
    return TRUE;
  g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
              "option '--topology' (or QEMU_PIN_TOPOLOGY) is for qemu-pin "
              "rebalance --dry-run only: the moves of a rebalance are made "
              "on this host");
  return FALSE;
}

/* The request for the VM on QEMU's command line ARGV (ARGC words, the
 * binary excluded), read as `plan` reads it: the same settings, the same
 * parser; the host and the ledger it is planned on in HOST_OUT and the
 * return value, without the VM's own record when it runs: that is in
 * OWN_OUT (NULL when there is none), what matched it in BY_OUT. */
static QpClaims *
read_request(QpOptions *opts, int argc, char **argv, QpQemuArgs **args_out,
             QpHost **host_out, QpClaim **own_out, const char **by_out,
             GError **error)
{
  g_autofree char *dropped = NULL;
  g_auto(GStrv) safe = NULL;
  if (!qp_edge_settings(opts, argc, &argv, &safe, &dropped, error) ||
      !check_moves_host(opts, error))
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
  QpClaims *claims =
      qp_launch_read_ledger(opts, args, TRUE, host_out, own_out, by_out, error);
  if (claims == NULL)
    return NULL;
  /* A page size the host has no pool of: refused as plan and a launch
   * refuse it, in QEMU's words, not made room for. */
  if (!qp_backends_page_sizes_check(args, *host_out, error)) {
    qp_claims_free(claims);
    g_clear_pointer(host_out, qp_host_free);
    g_clear_pointer(own_out, qp_claim_free);
    return NULL;
  }
  *args_out = g_steal_pointer(&args);
  return claims;
}

/* Why the VM of record C cannot move whatever the destination, as its
 * keeper would say, or NULL: a keeper that is not running moves nothing;
 * one whose QEMU can be given DIMMs (-m maxmem) or has a virtio-mem device
 * moves only where the binding moves with the pages (memory plugged or
 * grown later then lands on the new nodes). */
static const char *
why_unmovable(const QpClaim *c)
{
  if (!qp_status_keeper_running(c))
    return "its keeper is not running";
  g_autofree char *path = g_strdup_printf("/proc/%d/cmdline", c->qemu_pid);
  g_autofree char *args = NULL;
  gsize len = 0;
  if (c->qemu_pid <= 0 || !g_file_get_contents(path, &args, &len, NULL))
    return NULL;
  QpPluggable plug = qp_qemu_cmdline_memory_pluggable(args, len);
  if (plug == QP_PLUGGABLE_NONE)
    return NULL;
  /* The keeper runs as QEMU's user. */
  struct stat st;
  g_autofree char *proc = g_strdup_printf("/proc/%d", c->qemu_pid);
  g_autofree char *why = NULL;
  if (stat(proc, &st) < 0 ||
      !qp_mem_binding_movable(c->qemu_pid, st.st_uid, c->id, &why))
    return plug == QP_PLUGGABLE_VIRTIO_MEM
               ? "its memory can be resized (virtio-mem) and only its pages "
                 "could move"
               : "its memory can be plugged (-m maxmem) and only its pages "
                 "could move";
  return NULL;
}

/* What each record allows, from what the record says: a VM whose keeper
 * found the caller placed it (its record's "caller-placed") or that
 * REFUSED names (ids, may be NULL: keepers that refused a move of it for
 * that reason) is the caller's, kept where it is as fixed load. A VM moves
 * only inside the host nodes and CPUs it was started inside (the record's
 * "started-nodes" and "started-cpus": --hostnodes, --affinity, the
 * launcher's cpuset), which its keeper checks too, and only where its
 * memory fits under the host reserve it was started with ("started-reserve-
 * mib") as well as under the rebalance's own, as its keeper re-plans the
 * move with that reserve. A record of an older qemu-pin does not say the
 * reserve: its keeper refuses a move without room under it, and one
 * DECLINED names is kept. A record of mode none, or one that mode auto
 * placed best effort, gets none: never moved. */
static gboolean
names(const GPtrArray *ids, const char *id)
{
  for (guint j = 0; ids != NULL && j < ids->len; j++)
    if (g_strcmp0(ids->pdata[j], id) == 0)
      return TRUE;
  return FALSE;
}

static GArray *
vms_of(const QpClaims *claims, const GPtrArray *refused,
       const GPtrArray *declined)
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
    v.caller_set = c->caller_placed || names(refused, c->id);
    v.vfio = qp_claim_has_vfio(c);
    v.moved_at = c->moved_at;
    if (c->started_reserve->len > 0)
      v.reserve = c->started_reserve;
    if (!hwloc_bitmap_iszero(c->started_nodes))
      v.nodes = c->started_nodes;
    if (!hwloc_bitmap_iszero(c->started_cpus))
      v.cpus = c->started_cpus;
    v.why = why_unmovable(c);
    if (v.why == NULL && names(declined, c->id))
      v.why = "its keeper refused the move (what its record does not say: "
              "the settings it was started with)";
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

/* MOVES (of QpMove*): those listed, made unless --dry-run, none when the
 * moves fell short of rebalance-min-mib (HELD); R the last plan. */
static JsonNode *
to_json(const QpRebalance *r, const GPtrArray *moves, gboolean with_request,
        gboolean held)
{
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  json_builder_set_member_name(b, "moves");
  json_builder_add_value(b, qp_moves_to_json(held ? NULL : moves));
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
    qp_json_add_string_value(b, r->kept->pdata[i]);
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
    qp_print("qemu-pin: plan: the VM does not fit even after the moves "
             "(without them: %s)\n",
             before);
    return;
  }
  g_autofree char *nodes = qp_list_format(r->plan->host_nodes);
  qp_print("qemu-pin: plan: mode %s on host node%s %s (%u node%s; without "
           "the moves: %s)\n",
           qp_mode_name(r->plan->mode), r->req_nodes_after == 1 ? "" : "s",
           nodes, r->req_nodes_after, r->req_nodes_after == 1 ? "" : "s",
           before);
  /* As plan --human says it: the VM of this command line runs, and its
   * own record was left out. */
  g_autofree char *ignored = qp_status_ignored_words(r->plan);
  if (ignored != NULL)
    qp_print("qemu-pin: plan: ignored record %s\n", ignored);
}

/* MOVES (of QpMove*): listed with DRY_RUN, else the moves made; R the last
 * plan. */
static void
print_human(const QpRebalance *r, const GPtrArray *moves,
            const QpClaims *claims, gboolean dry_run, gboolean with_request,
            guint64 held_below)
{
  if (dry_run && held_below == 0)
    for (guint i = 0; i < moves->len; i++) {
      const QpMove *m = moves->pdata[i];
      g_autofree char *from = qp_list_format(m->from);
      g_autofree char *to = qp_list_format(m->to);
      g_autofree char *why =
          m->relieves >= 0
              ? g_strdup_printf(" (off node %d, whose claims exceed its "
                                "memory)",
                                m->relieves)
              : NULL;
      qp_print("qemu-pin: rebalance would move VM %s (%s) from nodes %s to "
               "%s: %" G_GUINT64_FORMAT " MiB%s\n",
               name_of(claims, m->vm), m->vm, from, to, m->mib,
               why != NULL ? why : "");
    }
  if (held_below > 0)
    qp_print("qemu-pin: rebalance: no VM to move: the moves would bring "
             "%" G_GUINT64_FORMAT
             " MiB of spanning VMs onto one node, less than "
             "rebalance-min-mib %" G_GUINT64_FORMAT "\n",
             qp_rebalance_gain(r), held_below);
  else if (moves->len == 0)
    qp_print("qemu-pin: rebalance: no VM to move\n");
  if (with_request)
    print_plan_line(r);
}

/* The host and the ledger's live records as they are now, read as the
 * first plan read them: with ARGS, as `plan` reads them for its VM
 * (RUNNING: that VM's own record left out), else the whole ledger. */
static QpClaims *
read_now(const QpOptions *opts, const QpQemuArgs *args, gboolean running,
         QpHost **host_out, GError **error)
{
  if (args != NULL) {
    g_autoptr(QpClaim) own = NULL;
    const char *by = NULL;
    return qp_launch_read_ledger(opts, args, running, host_out, &own, &by,
                                 error);
  }
  g_autoptr(QpHost) host = qp_host_load_full(opts->topology, FALSE, error);
  if (host == NULL)
    return NULL;
  g_autofree char *dir = qp_launch_state_dir(opts);
  QpClaims *claims = qp_ledger_read_claims(dir, host, error);
  if (claims != NULL)
    *host_out = g_steal_pointer(&host);
  return claims;
}

/* A rebalance being made: its plans (one more each time a keeper refuses a
 * move because the caller placed its VM since the ledger was read) and the
 * moves made. */
typedef struct {
  const QpOptions *opts;
  const QpQemuArgs *args; /* the VM to make room for, or NULL */
  gboolean running;       /* its own record is left out (rebalance) */
  gint64 cooldown_s;
  gboolean room_only; /* --make-room: room for ARGS only */
  gboolean print;     /* each move as `move` prints it, else one line -v */
  const QpHost *host; /* the last plan's: OWN_HOST, or the launch's */
  QpHost *own_host;
  QpClaims *claims;    /* the ledger as the last plan read it */
  GPtrArray *plans;    /* of QpRebalance*, the last the one being made */
  GPtrArray *made;     /* of QpMove* (the plans'), in the order made */
  GPtrArray *refused;  /* of char*: VMs whose keeper refused: the caller's */
  GPtrArray *declined; /* of char*: ... for what their records do not say */
} Making;

static void
making_clear(Making *b)
{
  g_clear_pointer(&b->own_host, qp_host_free);
  g_clear_pointer(&b->claims, qp_claims_free);
  g_clear_pointer(&b->plans, g_ptr_array_unref);
  g_clear_pointer(&b->made, g_ptr_array_unref);
  g_clear_pointer(&b->refused, g_ptr_array_unref);
  g_clear_pointer(&b->declined, g_ptr_array_unref);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Making, making_clear)

static QpRebalance *
last_plan(const Making *b)
{
  return b->plans->pdata[b->plans->len - 1];
}

/* Plans on B's host and ledger; the plan becomes the last. */
static gboolean
plan_moves(Making *b, GError **error)
{
  QpRebalance *r = qp_rebalance_live(
      b->opts, b->host, b->claims, b->args != NULL ? b->args->req : NULL,
      b->cooldown_s, b->room_only, b->refused, b->declined, error);
  if (r == NULL)
    return FALSE;
  g_ptr_array_add(b->plans, r);
  return TRUE;
}

/* B's first plan, on HOST and CLAIMS (taken: OWN_HOST is HOST or NULL). */
static gboolean
making_init(Making *b, const QpHost *host, QpHost *own_host, QpClaims *claims,
            GError **error)
{
  b->host = host;
  b->own_host = own_host;
  b->claims = claims;
  b->plans = g_ptr_array_new_with_free_func((GDestroyNotify)qp_rebalance_free);
  b->made = g_ptr_array_new();
  b->refused = g_ptr_array_new_with_free_func(g_free);
  b->declined = g_ptr_array_new_with_free_func(g_free);
  return plan_moves(b, error);
}

/* Makes the last plan's moves in order, each by the VM's keeper; stops at
 * the first that fails, saying which and what was made before it. A
 * keeper that refuses (the caller placed its VM, or what its record does
 * not say) stops it too, with that VM's id in *REFUSED, *CALLER set for the
 * first, and no ERROR. Each move made is printed
 * (B->print: the keeper's answer, as `move` prints it; else one line with
 * -v) and added to B->made. */
static gboolean
make_moves(Making *b, char **refused, gboolean *caller, GError **error)
{
  const QpRebalance *r = last_plan(b);
  QpOptions quiet = *b->opts;
  quiet.json = FALSE;
  for (guint i = 0; i < r->moves->len; i++) {
    QpMove *m = r->moves->pdata[i];
    g_autofree char *to = qp_list_format(m->to);
    const QpClaim *c = claim_by_id(b->claims, m->vm);
    g_autoptr(GError) local = NULL;
    g_autoptr(QpJv) reply =
        c != NULL ? qp_move_ask(c, to, QP_MOVE_DEFAULT_RATE_MIB, &local) : NULL;
    if (reply == NULL && (g_error_matches(local, QP_LAUNCH_ERROR,
                                          QP_LAUNCH_ERROR_CALLER_PLACED) ||
                          g_error_matches(local, QP_LAUNCH_ERROR,
                                          QP_LAUNCH_ERROR_MOVE_REFUSED))) {
      qp_info("rebalance: VM %s (%s) not moved: %s", name_of(b->claims, m->vm),
              m->vm, local->message);
      *refused = g_strdup(m->vm);
      *caller = g_error_matches(local, QP_LAUNCH_ERROR,
                                QP_LAUNCH_ERROR_CALLER_PLACED);
      return FALSE;
    }
    if (reply == NULL) {
      gboolean none = b->made->len == 0;
      g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                  "rebalance: move %u of %u (VM %s to nodes %s) failed, "
                  "%s%s: %s",
                  i + 1, r->moves->len, m->vm, to,
                  none ? "no move made" : "the moves before it stay made",
                  none ? "" : " (qemu-pin status shows them)",
                  local != NULL ? local->message : "its record is gone");
      return FALSE;
    }
    g_ptr_array_add(b->made, m);
    g_autofree char *from = qp_list_format(m->from);
    if (b->print)
      qp_move_print_answer(&quiet, reply);
    else
      qp_info("moved VM %s (%s) from nodes %s to %s: %" G_GUINT64_FORMAT " MiB",
              name_of(b->claims, m->vm), m->vm, from, to, m->mib);
  }
  return TRUE;
}

/* The moves of --make-room's plan R help: the VM then fits on fewer
 * nodes, or only then. */
static gboolean
room_helps(const QpRebalance *r)
{
  return r->plan != NULL && r->moves->len > 0 &&
         (r->req_nodes_before == 0 || r->req_nodes_after < r->req_nodes_before);
}

/* Makes B's moves. A keeper that refuses one, because the caller placed its
 * VM (pinned after the ledger was read) or for what its record does not say
 * (the VM's own reserve, --hostnodes or --affinity, such as no room on the
 * destination under them), does not end the rebalance: it is
 * planned again without that VM, from the host and the ledger as they are
 * then (the moves made are in it), at most once per VM the first plan
 * saw; for --make-room only while the moves still help. Any other failure
 * ends it, with the moves before it made. */
static gboolean
make_all(Making *b, GError **error)
{
  guint most = b->claims->claims->len;
  for (guint replans = 0;; replans++) {
    g_autofree char *vm = NULL;
    gboolean caller = FALSE;
    if (make_moves(b, &vm, &caller, error))
      return TRUE;
    if (vm == NULL)
      return FALSE;
    if (replans == most) {
      g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                  "rebalance: planned %u times, and a keeper refused a move "
                  "each time; %u move%s made",
                  replans + 1, b->made->len, b->made->len == 1 ? "" : "s");
      return FALSE;
    }
    g_ptr_array_add(caller ? b->refused : b->declined, g_steal_pointer(&vm));
    g_clear_pointer(&b->own_host, qp_host_free);
    g_clear_pointer(&b->claims, qp_claims_free);
    b->claims = read_now(b->opts, b->args, b->running, &b->own_host, error);
    b->host = b->own_host;
    if (b->claims == NULL || !plan_moves(b, error))
      return FALSE;
    qp_info("rebalance: planned again without the VMs whose keepers "
            "refused: %u move%s",
            last_plan(b)->moves->len, last_plan(b)->moves->len == 1 ? "" : "s");
    if (b->room_only && !room_helps(last_plan(b)))
      return TRUE;
  }
}

QpRebalance *
qp_rebalance_live(const QpOptions *opts, const QpHost *host,
                  const QpClaims *claims, const QpRequest *req,
                  gint64 cooldown_s, gboolean room_only,
                  const GPtrArray *refused, const GPtrArray *declined,
                  GError **error)
{
  g_autoptr(GArray) vms = vms_of(claims, refused, declined);
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
  /* The launch refuses it, in QEMU's words: no moves for it first. */
  if (!qp_backends_page_sizes_check(args, host, NULL))
    return FALSE;
  QpClaims *claims = qp_ledger_read_claims(state_dir, host, &error);
  if (claims == NULL)
    return FALSE;
  g_auto(Making) b = {opts, args, FALSE, QP_REBALANCE_COOLDOWN_S, TRUE, FALSE};
  /* Not planned: the launch's own plan says why, in its words. */
  if (!making_init(&b, host, NULL, claims, &error))
    return FALSE;
  const QpRebalance *r = last_plan(&b);
  if (!room_helps(r))
    return FALSE;
  qp_info("make-room: %u move%s (%" G_GUINT64_FORMAT
          " MiB) put this VM on %u node%s instead of %u",
          r->moves->len, r->moves->len == 1 ? "" : "s", r->mib,
          r->req_nodes_after, r->req_nodes_after == 1 ? "" : "s",
          r->req_nodes_before);
  if (!make_all(&b, &error))
    qp_warning("make-room: %s; launching with the plan the host allows now",
               error->message);
  return b.made->len > 0;
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
  /* Other commands' output options: refused, not ignored. */
  if (!qp_command_options_only("rebalance", opts, error))
    return -1;
  /* The VM to make room for comes after --: a word without it is more
   * likely a VM's name (as move takes one) than a QEMU binary. */
  if (qemu_index < n &&
      (qemu_index == 0 || strcmp(words[qemu_index - 1], "--") != 0)) {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
                "rebalance: unexpected argument '%s': a VM to make room for "
                "is given after --, as in qemu-pin rebalance -- QEMU_BINARY "
                "QEMU_ARGS...",
                words[qemu_index]);
    return -1;
  }
  g_autoptr(QpQemuArgs) args = NULL;
  QpHost *host = NULL;
  QpClaims *claims = NULL;
  g_autoptr(QpClaim) own = NULL;
  const char *own_by = NULL;
  if (qemu_index < n)
    claims = read_request(opts, n - qemu_index - 1, words + qemu_index + 1,
                          &args, &host, &own, &own_by, error);
  else if (qp_options_parse_env(opts, error) &&
           qp_options_load_config(opts, NULL, error) &&
           check_moves_host(opts, error)) {
    qp_log_init(opts->verbose);
    claims = read_now(opts, NULL, FALSE, &host, error);
  }
  if (claims == NULL)
    return -1;

  g_auto(Making) b = {opts, args, TRUE, cooldown, FALSE, !opts->json};
  if (!making_init(&b, host, host, claims, error))
    return -1;
  QpRebalance *r = last_plan(&b);
  if (args != NULL && r->plan == NULL) {
    /* Said once, in the words `plan` would use. */
    g_autoptr(GError) why = NULL;
    g_autoptr(QpPlan) none =
        qp_plan_compute(b.host, r->after, args->req, &opts->placement, &why);
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
  if (!opts->dry_run && held_below == 0 && !make_all(&b, error))
    return -1;
  const QpRebalance *first = r;
  r = last_plan(&b);
  /* "Without the moves" is without any of them, as the first plan saw. */
  r->req_nodes_before = first->req_nodes_before;
  /* The plan of a running VM names its own record, left out, as `plan`
   * does. */
  if (r->plan != NULL)
    qp_launch_plan_ignores(r->plan, g_steal_pointer(&own), own_by);
  const GPtrArray *moves = opts->dry_run ? first->moves : b.made;
  if (opts->json) {
    g_autoptr(JsonNode) node = to_json(r, moves, args != NULL, held_below > 0);
    g_autofree char *text = json_to_string(node, TRUE);
    qp_print("%s\n", text);
  } else
    print_human(r, moves, b.claims, opts->dry_run, args != NULL, held_below);
  return 0;
}
