/* `qemu-pin move` (move.h): the command's edge. The move itself is the
 * keeper's (launcher/keeper/move.c): it holds the VM's claim and plan. */
#include "launcher/move.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "launcher/front/front.h"
#include "launcher/keeper/keeper.h"
#include "launcher/log.h"
#include "launcher/launch.h"
#include "topology/host/host.h"
#include "topology/ledger/ledger.h"

typedef struct {
  const char *vm;
  const char *to_nodes;
  guint rate_mib;
} MoveArgs;

static gboolean
usage(GError **error, const char *fmt, const char *arg)
{
  g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
              "move: %s%s%s%s: usage: qemu-pin move VM --to-nodes=NODELIST "
              "[--rate=MIB] [--state-dir=DIR] [--json]",
              fmt, *arg ? " '" : "", arg, *arg ? "'" : "");
  return FALSE;
}

/* --name=VALUE or --name VALUE at *I: 1 with *VALUE, 0 when the word is
 * another, -1 (ERROR set) when the value is missing. */
static int
take(int argc, char **argv, int *i, const char *name, const char *what,
     const char **value, GError **error)
{
  const char *a = argv[*i];
  gsize n = strlen(name);
  if (strncmp(a, name, n) != 0 || (a[n] != '=' && a[n] != '\0'))
    return 0;
  if (a[n] == '=') {
    *value = a + n + 1;
    return 1;
  }
  if (*i + 1 < argc) {
    *value = argv[++*i];
    return 1;
  }
  g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
              "move: option '%s' needs a value: %s", name, what);
  return -1;
}

static gboolean
parse_args(QpOptions *opts, int argc, char **argv, MoveArgs *m, GError **error)
{
  m->rate_mib = QP_MOVE_DEFAULT_RATE_MIB;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = NULL;
    int t, at = i;
    /* -v, -vv, --verbose: read as for every command. */
    QpCliWord w;
    qp_cli_word(argc, argv, &at, &w);
    if ((t = take(argc, argv, &i, "--to-nodes", "NODELIST", &v, error)) != 0) {
      if (t < 0)
        return FALSE;
      m->to_nodes = v;
    } else if ((t = take(argc, argv, &i, "--state-dir", "DIR", &v, error)) !=
               0) {
      if (t < 0)
        return FALSE;
      g_free(opts->state_dir);
      opts->state_dir = g_strdup(v);
      g_hash_table_add(opts->given, (gpointer) "state-dir");
    } else if ((t = take(argc, argv, &i, "--rate", "MiB per second", &v,
                         error)) != 0) {
      if (t < 0)
        return FALSE;
      char *end = NULL;
      guint64 r = g_ascii_strtoull(v, &end, 10);
      if (!g_ascii_isdigit(*v) || *end != '\0' || r > G_MAXUINT32) {
        g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
                    "move: --rate '%s' is not valid: expected MiB per "
                    "second (0: no limit)",
                    v);
        return FALSE;
      }
      m->rate_mib = (guint)r;
    } else if (strcmp(a, "--json") == 0)
      opts->json = TRUE;
    else if (w.kind == QP_CLI_VERBOSE)
      opts->verbose += w.verbose;
    else if (a[0] == '-')
      return usage(error, "unknown option", a);
    else if (m->vm != NULL)
      return usage(error, "one VM only, got", a);
    else
      m->vm = a;
  }
  if (m->vm == NULL)
    return usage(error, "no VM given", "");
  if (m->to_nodes == NULL)
    return usage(error, "no --to-nodes given for", m->vm);
  return TRUE;
}

/* NODES must be nodes of HOST. */
static gboolean
check_nodes(const QpHost *host, const char *text, GError **error)
{
  g_auto(hwloc_bitmap_t) nodes = NULL;
  g_autoptr(GError) local = NULL;
  if (!qp_list_parse(text, "move: --to-nodes", QP_LIST_MAX_INDEX, &nodes,
                     &local)) {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE, "%s",
                local->message);
    return FALSE;
  }
  g_auto(hwloc_bitmap_t) all = hwloc_bitmap_alloc();
  for (guint i = 0; i < host->n_nodes; i++)
    hwloc_bitmap_set(all, (unsigned)host->nodes[i].id);
  if (hwloc_bitmap_isincluded(nodes, all))
    return TRUE;
  g_autofree char *have = qp_list_format(all);
  g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
              "move: --to-nodes=%s names nodes this host does not have: "
              "expected nodes of %s",
              text, have);
  return FALSE;
}

/* The record of VM: its id, -name, -uuid or QEMU pid. A word that names
 * more than one VM (two VMs of one -name, a -name that is another VM's pid)
 * is refused, naming them: a move of the wrong VM is not undone. NULL, with
 * ERROR set only then, when none or several match. */
static const QpClaim *
find_vm(const QpClaims *claims, const char *vm, GError **error)
{
  char *end = NULL;
  long pid = strtol(vm, &end, 10);
  gboolean is_pid = *vm != '\0' && *end == '\0' && pid > 0;
  const QpClaim *found = NULL;
  g_autoptr(GString) all = g_string_new(NULL);
  guint n = 0;
  for (guint i = 0; i < claims->claims->len; i++) {
    const QpClaim *c = claims->claims->pdata[i];
    const char *as = g_strcmp0(c->id, vm) == 0     ? "record id"
                     : g_strcmp0(c->name, vm) == 0 ? "-name"
                     : c->uuid != NULL && g_ascii_strcasecmp(c->uuid, vm) == 0
                         ? "-uuid"
                     : is_pid && c->qemu_pid == pid ? "QEMU pid"
                                                    : NULL;
    if (as == NULL)
      continue;
    found = c;
    g_string_append_printf(all, "%s%s (its %s)", n++ ? ", " : "", c->id, as);
  }
  if (n <= 1)
    return found;
  g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
              "move: '%s' names %u VMs: %s: expected one, by its record id", vm,
              n, all->str);
  return NULL;
}

/* Asks keeper KEEPER_PID; its answer (one JSON object), or NULL. */
static QpJv *
ask_keeper(int keeper_pid, const char *request, int timeout_s, GError **error)
{
  struct sockaddr_un sa;
  socklen_t len = qp_keeper_control_address(keeper_pid, &sa);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&sa, len) < 0) {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_MOVE_REFUSED,
                "move: the VM's keeper (pid %d) does not answer: %s",
                keeper_pid, g_strerror(errno));
    if (fd >= 0)
      close(fd);
    return NULL;
  }
  /* The name is anyone's to bind once the keeper is gone: the answer
   * counts only from the keeper itself. */
  struct ucred cred = {0, 0, 0};
  socklen_t clen = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0 ||
      cred.pid != keeper_pid) {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_MOVE_REFUSED,
                "move: the VM's keeper (pid %d) is not running, and pid %d "
                "holds its control socket: nothing asked",
                keeper_pid, (int)cred.pid);
    close(fd);
    return NULL;
  }
  (void)!write(fd, request, strlen(request));
  shutdown(fd, SHUT_WR);
  GString *s = g_string_new(NULL);
  char buf[4096];
  gboolean timed_out = FALSE;
  gint64 deadline = g_get_monotonic_time() + timeout_s * G_USEC_PER_SEC;
  for (;;) {
    gint64 left = (deadline - g_get_monotonic_time() + 999) / 1000;
    struct pollfd p = {fd, POLLIN, 0};
    int r = left > 0 ? poll(&p, 1, (int)MIN(left, G_MAXINT)) : 0;
    if (r < 0 && errno == EINTR)
      continue;
    if (r == 0) {
      timed_out = TRUE;
      break;
    }
    ssize_t n = r > 0 ? read(fd, buf, sizeof(buf)) : -1;
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    g_string_append_len(s, buf, n);
  }
  close(fd);
  if (timed_out) {
    /* No end of the answer by the deadline: a stopped or stuck keeper. */
    g_string_free(s, TRUE);
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "move: the VM's keeper (pid %d) did not answer within %d s "
                "(stopped? qemu-pin status shows whether the move was made)",
                keeper_pid, timeout_s);
    return NULL;
  }
  g_autofree char *text = g_string_free(s, FALSE);
  g_autoptr(QpJv) answer = qp_jv_parse(text, -1, NULL);
  if (!qp_jv_is(answer, QP_JV_OBJECT)) {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_FAILED,
                "move: the VM's keeper (pid %d) ended without an answer",
                keeper_pid);
    return NULL;
  }
  return g_steal_pointer(&answer);
}

void
qp_move_print_answer(const QpOptions *opts, const QpJv *o)
{
  if (opts->json) {
    g_autofree char *text = qp_jv_write(o, TRUE);
    qp_print("%s\n", text);
    return;
  }
  const char *name = qp_jv_get_string_or(o, "name", NULL);
  qp_print("qemu-pin: moved VM %s (%s) from nodes %s to %s: %" G_GINT64_FORMAT
           " MiB of pages moved, %.1f%% of its guest memory there; ",
           name ? name : "-", qp_jv_get_string_or(o, "vm", "?"),
           qp_jv_get_string_or(o, "from", "?"),
           qp_jv_get_string_or(o, "to", "?"),
           qp_jv_get_int_or(o, "moved-mib", 0),
           (double)qp_jv_get_int_or(o, "on-destination-permille", 0) / 10.0);
  const char *binding = qp_jv_get_string_or(o, "binding", "");
  if (qp_jv_get_bool_or(o, "binding-moved", FALSE))
    qp_print("its binding moved too (cgroup %s)\n", binding);
  else if (g_strcmp0(qp_jv_get_string_or(o, "from", NULL),
                     qp_jv_get_string_or(o, "to", NULL)) == 0)
    /* Placed again on the same nodes: the binding is already theirs. */
    qp_print("the binding stays, on the same nodes\n");
  else
    qp_print("only the pages moved, not the binding (memory QEMU allocates "
             "from now on may land on the old nodes): %s\n",
             binding);
}

/* The error code of the keeper's refusal or failure ERR (its answer
 * REPLY's "error"): its "code" says which refusal. A keeper of a qemu-pin
 * before 19b0f58, still running after an upgrade, answers a destination
 * the VM does not fit under its own settings (its reserve, --hostnodes)
 * with no code: "move refused: " and the planner's words, said in the
 * move's first step, before anything changed. That is a refusal, as the
 * keepers since answer it, so that `rebalance` plans again without that VM
 * rather than stop at it on every run until the VM restarts. Its other
 * uncoded "move refused: " answer is the one of a client that may not ask
 * (root or the VM's own user only), a failure for every keeper. */
static int
answer_error_code(const QpJv *reply, const char *err)
{
  const char *code = qp_jv_get_string_or(reply, "code", NULL);
  if (g_strcmp0(code, QP_MOVE_REFUSED_CALLER_PLACED) == 0)
    return QP_LAUNCH_ERROR_CALLER_PLACED;
  if (g_strcmp0(code, QP_MOVE_REFUSED) == 0)
    return QP_LAUNCH_ERROR_MOVE_REFUSED;
  if (code == NULL && g_str_has_prefix(err, "move refused: ") &&
      strstr(err, "only root or the VM's own user may move it") == NULL)
    return QP_LAUNCH_ERROR_MOVE_REFUSED;
  return QP_LAUNCH_ERROR_FAILED;
}

QpJv *
qp_move_ask(const QpClaim *vm, const char *to_nodes, guint rate_mib,
            GError **error)
{
  g_autofree char *request = g_strdup_printf(
      "{\"to-nodes\": \"%s\", \"rate-mib\": %u}\n", to_nodes, rate_mib);
  /* Its pages at RATE_MIB per second (0: no limit, taken as 256), twice
   * over, and a minute for the rest. */
  guint64 mib = 0;
  for (guint i = 0; i < vm->mem->len; i++)
    mib += g_array_index(vm->mem, QpNodeAmount, i).mib;
  guint64 secs = 60 + 2 * mib / (rate_mib > 0 ? rate_mib : 256);
  g_autoptr(QpJv) reply =
      ask_keeper(vm->keeper_pid, request, (int)MIN(secs, 86400), error);
  if (reply == NULL)
    return NULL;
  const char *err = qp_jv_get_string_or(reply, "error", NULL);
  if (err != NULL) {
    g_set_error(error, QP_LAUNCH_ERROR, answer_error_code(reply, err), "%s%s",
                g_str_has_prefix(err, "move ") || g_str_has_prefix(err, "move:")
                    ? ""
                    : "move: ",
                err);
    return NULL;
  }
  return g_steal_pointer(&reply);
}

int
qp_cmd_move(QpOptions *opts, int argc, char **argv, GError **error)
{
  MoveArgs m = {NULL, NULL, 0};
  if (!parse_args(opts, argc, argv, &m, error) ||
      !qp_options_parse_env(opts, error))
    return -1;
  g_autoptr(QpHost) host = qp_host_load_full(opts->topology, FALSE, error);
  if (host == NULL || !check_nodes(host, m.to_nodes, error))
    return -1;
  g_autofree char *dir = qp_launch_state_dir(opts);
  g_autoptr(QpClaims) claims = qp_ledger_read_claims(dir, host, error);
  if (claims == NULL)
    return -1;
  const QpClaim *c = find_vm(claims, m.vm, error);
  if (c == NULL && *error != NULL)
    return -1;
  if (c == NULL) {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
                "move: no VM '%s' in the ledger at %s: expected a record id, "
                "-name, -uuid or QEMU pid of a running VM (qemu-pin status)",
                m.vm, dir);
    return -1;
  }
  g_autoptr(QpJv) reply = qp_move_ask(c, m.to_nodes, m.rate_mib, error);
  if (reply == NULL)
    return -1;
  qp_move_print_answer(opts, reply);
  return 0;
}
