/* A small QMP client over a connected stream fd.
 *
 * Everything is blocking with poll() and a deadline: the keeper talks to one
 * QEMU at a time and has nothing else to do while it waits. Input is
 * buffered and split into lines; QEMU writes one JSON object per line
 * (ending in "\r\n"), so a line that is not a JSON object is a protocol
 * error. Events that arrive while a command is outstanding are queued. */
#include "qmp/qmp.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The quark's name is the argument as written. */
/* clang-format off */
G_DEFINE_QUARK(qp-qmp-error-quark, qp_qmp_error)
/* clang-format on */

/* A hostile or broken peer must not make us buffer without bound. */
#define QP_QMP_MAX_LINE (16 * 1024 * 1024)
/* json-glib's parser is recursive: bound the nesting before handing it a
 * line (QEMU's own parser stops at 1024 too). */
#define QP_QMP_MAX_DEPTH 1024
#define QP_QMP_EXCERPT 48

struct QpQmp {
  int fd;
  guint timeout_ms;
  GString *in;   /* bytes read and not yet consumed */
  gsize scanned; /* bytes of IN known to hold no '\n' */
  gboolean eof;  /* the peer closed its end */
  GQueue events; /* of JsonObject * */
  gint64 next_id;
  GHashTable *abandoned; /* ids of commands that timed out */
  GQueue ahead;          /* of Ahead *: sent, reply not yet asked for */
  gint64 waited_us;      /* blocked waiting for the peer, in all */
  GHashTable *early;     /* id -> JsonObject: replies to commands sent ahead
                            that came before the one awaited */
  gboolean exiting;      /* QEMU said SHUTDOWN on its way out */
};

/* A command sent ahead of its qp_qmp_execute() (qp_qmp_handshake_ahead). */
typedef struct {
  char *command;
  gint64 id;
} Ahead;

static void
ahead_free(gpointer p)
{
  Ahead *a = p;
  g_free(a->command);
  g_free(a);
}

QpQmp *
qp_qmp_new(int fd, guint timeout_ms)
{
  QpQmp *qmp = g_new0(QpQmp, 1);

  qmp->fd = fd;
  qmp->timeout_ms = timeout_ms;
  qmp->in = g_string_sized_new(4096);
  g_queue_init(&qmp->events);
  g_queue_init(&qmp->ahead);
  qmp->early = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free,
                                     (GDestroyNotify)json_object_unref);
  qmp->next_id = 1;
  qmp->abandoned =
      g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
  return qmp;
}

void
qp_qmp_free(QpQmp *qmp)
{
  if (qmp == NULL)
    return;
  if (qmp->fd >= 0)
    close(qmp->fd);
  g_string_free(qmp->in, TRUE);
  g_queue_clear_full(&qmp->events, (GDestroyNotify)json_object_unref);
  g_hash_table_destroy(qmp->abandoned);
  g_queue_clear_full(&qmp->ahead, ahead_free);
  g_hash_table_destroy(qmp->early);
  g_free(qmp);
}

void
qp_qmp_set_timeout(QpQmp *qmp, guint timeout_ms)
{
  qmp->timeout_ms = timeout_ms;
}

int
qp_qmp_get_fd(const QpQmp *qmp)
{
  return qmp->fd;
}

gint64
qp_qmp_waited_us(const QpQmp *qmp)
{
  return qmp->waited_us;
}

gboolean
qp_qmp_has_event(const QpQmp *qmp)
{
  /* A complete line already read counts too: poll() will not report it. */
  return qmp->events.length > 0 ||
         memchr(qmp->in->str, '\n', qmp->in->len) != NULL;
}

/* ---- parsing ---------------------------------------------------------- */

/* A short, printable, one-line excerpt of untrusted bytes: control
 * characters and bytes above 0x7e become \n, \r, \t or \xHH. */
static char *
excerpt(const char *data, gsize len)
{
  gsize n = MIN(len, QP_QMP_EXCERPT);
  GString *out = g_string_sized_new(n + 8);

  for (gsize i = 0; i < n; i++) {
    guchar c = (guchar)data[i];

    if (c == '\n')
      g_string_append(out, "\\n");
    else if (c == '\r')
      g_string_append(out, "\\r");
    else if (c == '\t')
      g_string_append(out, "\\t");
    else if (c < 0x20 || c > 0x7e)
      g_string_append_printf(out, "\\x%02x", c);
    else
      g_string_append_c(out, (char)c);
  }
  if (n < len)
    g_string_append(out, "...");
  return g_string_free(out, FALSE);
}

/* The deepest nesting of arrays and objects in DATA, outside strings;
 * stops counting at LIMIT + 1. */
static guint
json_depth(const char *data, gsize len, guint limit)
{
  guint depth = 0, max = 0;
  gboolean in_string = FALSE;

  for (gsize i = 0; i < len; i++) {
    char c = data[i];

    if (in_string) {
      if (c == '\\')
        i++;
      else if (c == '"')
        in_string = FALSE;
      continue;
    }
    if (c == '"') {
      in_string = TRUE;
    } else if (c == '[' || c == '{') {
      if (++depth > max)
        max = depth;
      if (max > limit)
        break;
    } else if ((c == ']' || c == '}') && depth > 0) {
      depth--;
    }
  }
  return max;
}

JsonObject *
qp_qmp_parse_line(const char *line, gsize len, GError **error)
{
  g_autoptr(JsonParser) parser = NULL;
  g_autoptr(GError) local = NULL;
  JsonNode *root;

  if (!g_utf8_validate(line, len, NULL)) {
    g_autofree char *ex = excerpt(line, len);
    g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                "expected a JSON object, got invalid UTF-8 '%s'", ex);
    return NULL;
  }
  if (json_depth(line, len, QP_QMP_MAX_DEPTH) > QP_QMP_MAX_DEPTH) {
    g_autofree char *ex = excerpt(line, len);
    g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                "expected a JSON object nested at most %d deep, got '%s'",
                QP_QMP_MAX_DEPTH, ex);
    return NULL;
  }

  parser = json_parser_new_immutable();
  if (!json_parser_load_from_data(parser, line, (gssize)len, &local) ||
      (root = json_parser_get_root(parser)) == NULL ||
      !JSON_NODE_HOLDS_OBJECT(root)) {
    g_autofree char *ex = excerpt(line, len);
    g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                "expected a JSON object, got '%s'", ex);
    return NULL;
  }
  return json_object_ref(json_node_get_object(root));
}

/* The message as a short one-line excerpt, for errors. */
static char *
object_excerpt(JsonObject *obj)
{
  g_autoptr(JsonNode) node = json_node_init_object(json_node_alloc(), obj);
  g_autofree char *text = json_to_string(node, FALSE);

  return excerpt(text, strlen(text));
}

/* ---- I/O -------------------------------------------------------------- */

/* Milliseconds left until DEADLINE (monotonic µs; -1: none), for poll(). */
static int
remaining_ms(gint64 deadline)
{
  gint64 left;

  if (deadline < 0)
    return -1;
  left = deadline - g_get_monotonic_time();
  if (left <= 0)
    return 0;
  return (int)MIN((left + 999) / 1000, G_MAXINT);
}

static gint64
deadline_after(int timeout_ms)
{
  if (timeout_ms < 0)
    return -1;
  return g_get_monotonic_time() + (gint64)timeout_ms * 1000;
}

/* Waits for EVENTS on the fd. FALSE with QP_QMP_ERROR_TIMEOUT at DEADLINE. */
static gboolean
wait_fd(QpQmp *qmp, short events, gint64 deadline, GError **error)
{
  for (;;) {
    struct pollfd pfd = {.fd = qmp->fd, .events = events};
    int ms = remaining_ms(deadline);
    gint64 t0 = g_get_monotonic_time();
    int n = poll(&pfd, 1, ms);
    qmp->waited_us += g_get_monotonic_time() - t0;

    if (n > 0)
      return TRUE; /* readable, writable, HUP or ERR: the next call says */
    if (n < 0 && errno != EINTR) {
      int saved = errno;
      g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_IO, "poll failed: %s",
                  g_strerror(saved));
      return FALSE;
    }
    if (n == 0 && ms == 0) {
      g_set_error_literal(error, QP_QMP_ERROR, QP_QMP_ERROR_TIMEOUT,
                          "timed out");
      return FALSE;
    }
  }
}

static gboolean
send_all(QpQmp *qmp, const char *data, gsize len, gint64 deadline,
         GError **error)
{
  gboolean use_write = FALSE;

  while (len > 0) {
    ssize_t n = use_write ? write(qmp->fd, data, len)
                          : send(qmp->fd, data, len, MSG_NOSIGNAL);

    if (n >= 0) {
      data += n;
      len -= (gsize)n;
      continue;
    }
    if (errno == EINTR)
      continue;
    if (errno == ENOTSOCK && !use_write) {
      use_write = TRUE; /* a pipe or a tty: SIGPIPE is the caller's business */
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_fd(qmp, POLLOUT, deadline, error))
        return FALSE;
      continue;
    }
    {
      int saved = errno;
      g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_IO,
                  saved == EPIPE ? "peer closed the connection (%s)"
                                 : "write failed: %s",
                  g_strerror(saved));
      return FALSE;
    }
  }
  return TRUE;
}

/* Reads more bytes into the buffer; FALSE on error, timeout or EOF. */
static gboolean
fill(QpQmp *qmp, gint64 deadline, GError **error)
{
  char chunk[65536];

  for (;;) {
    ssize_t n;

    if (!wait_fd(qmp, POLLIN, deadline, error))
      return FALSE;
    n = read(qmp->fd, chunk, sizeof chunk);
    if (n > 0) {
      g_string_append_len(qmp->in, chunk, n);
      return TRUE;
    }
    if (n == 0) {
      qmp->eof = TRUE;
      g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_IO,
                  qmp->in->len > 0
                      ? "peer closed the connection in the middle of a message"
                      : "peer closed the connection");
      return FALSE;
    }
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
      continue;
    if (errno == ECONNRESET) {
      /* A Unix socket's peer that exits with our bytes unread. */
      qmp->eof = TRUE;
      g_set_error_literal(error, QP_QMP_ERROR, QP_QMP_ERROR_IO,
                          "peer closed the connection");
      return FALSE;
    }
    {
      int saved = errno;
      g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_IO, "read failed: %s",
                  g_strerror(saved));
      return FALSE;
    }
  }
}

/* The next message from the peer, waiting until DEADLINE. Blank lines are
 * skipped. On timeout, QP_QMP_ERROR_TIMEOUT with a placeholder message that
 * callers replace. */
static JsonObject *
read_message(QpQmp *qmp, gint64 deadline, GError **error)
{
  for (;;) {
    char *nl =
        memchr(qmp->in->str + qmp->scanned, '\n', qmp->in->len - qmp->scanned);

    if (nl != NULL) {
      gsize len = (gsize)(nl - qmp->in->str);
      gsize consumed = len + 1;
      JsonObject *obj = NULL;
      const char *line = qmp->in->str;

      while (len > 0 && g_ascii_isspace(line[len - 1]))
        len--;
      while (len > 0 && g_ascii_isspace(*line)) {
        line++;
        len--;
      }
      if (len > 0)
        obj = qp_qmp_parse_line(line, len, error);
      g_string_erase(qmp->in, 0, (gssize)consumed);
      qmp->scanned = 0;
      if (len == 0)
        continue;
      return obj;
    }
    qmp->scanned = qmp->in->len;
    if (qmp->in->len > QP_QMP_MAX_LINE) {
      g_autofree char *ex = excerpt(qmp->in->str, qmp->in->len);
      g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                  "expected a message of at most %d bytes, got more: '%s'",
                  QP_QMP_MAX_LINE, ex);
      return NULL;
    }
    if (qmp->eof) {
      g_set_error_literal(error, QP_QMP_ERROR, QP_QMP_ERROR_IO,
                          "peer closed the connection");
      return NULL;
    }
    if (!fill(qmp, deadline, error))
      return NULL;
  }
}

/* ---- commands and events ---------------------------------------------- */

/* Member NAME of OBJ if it is a string, else NULL. (json-glib's getters
 * complain loudly about wrong types; a peer's message may have any.) */
static const char *
string_or_null(JsonObject *obj, const char *name)
{
  JsonNode *node = json_object_get_member(obj, name);

  if (node == NULL || !JSON_NODE_HOLDS_VALUE(node) ||
      json_node_get_value_type(node) != G_TYPE_STRING)
    return NULL;
  return json_node_get_string(node);
}

/* TRUE if OBJ is an event (queued, reference taken). */
static gboolean
queue_if_event(QpQmp *qmp, JsonObject *obj, GError **error, gboolean *is_event)
{
  JsonNode *ev = json_object_get_member(obj, "event");

  *is_event = FALSE;
  if (ev == NULL)
    return TRUE;
  if (string_or_null(obj, "event") == NULL) {
    g_autofree char *ex = object_excerpt(obj);
    g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                "expected an event name string, got '%s'", ex);
    return FALSE;
  }
  g_queue_push_tail(&qmp->events, json_object_ref(obj));
  *is_event = TRUE;
  qmp->exiting |= qp_qmp_event_is_exit(obj);
  return TRUE;
}

gboolean
qp_qmp_event_is_exit(JsonObject *ev)
{
  if (g_strcmp0(string_or_null(ev, "event"), "SHUTDOWN") != 0)
    return FALSE;
  JsonNode *node = json_object_get_member(ev, "data");
  if (node == NULL || !JSON_NODE_HOLDS_OBJECT(node))
    return FALSE;
  const char *reason = string_or_null(json_node_get_object(node), "reason");
  return g_strcmp0(reason, "host-signal") == 0 ||
         g_strcmp0(reason, "host-qmp-quit") == 0;
}

gboolean
qp_qmp_exiting(const QpQmp *qmp)
{
  return qmp->exiting;
}

/* The integer id of a reply, or FALSE if it has none (or not an integer). */
static gboolean
reply_id(JsonObject *obj, gint64 *id)
{
  JsonNode *node = json_object_get_member(obj, "id");

  if (node == NULL || !JSON_NODE_HOLDS_VALUE(node) ||
      json_node_get_value_type(node) != G_TYPE_INT64)
    return FALSE;
  *id = json_node_get_int(node);
  return TRUE;
}

static gboolean
is_reply(JsonObject *obj)
{
  return json_object_has_member(obj, "return") ||
         json_object_has_member(obj, "error");
}

/* A late reply to a command we gave up on: drop it. */
static gboolean
is_abandoned_reply(QpQmp *qmp, JsonObject *obj)
{
  gint64 id;

  return is_reply(obj) && reply_id(obj, &id) &&
         g_hash_table_remove(qmp->abandoned, &id);
}

static JsonNode *
error_reply(const char *command, JsonObject *obj, GError **error)
{
  JsonNode *err = json_object_get_member(obj, "error");
  JsonObject *eobj;
  const char *klass, *desc;

  if (!JSON_NODE_HOLDS_OBJECT(err)) {
    g_autofree char *ex = object_excerpt(obj);
    g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                "%s: expected an error object, got '%s'", command, ex);
    return NULL;
  }
  eobj = json_node_get_object(err);
  klass = string_or_null(eobj, "class");
  desc = string_or_null(eobj, "desc");
  if (klass == NULL || desc == NULL) {
    g_autofree char *ex = object_excerpt(obj);
    g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                "%s: expected an error with 'class' and 'desc', got '%s'",
                command, ex);
    return NULL;
  }
  {
    /* QEMU's descriptions are one line, but a peer's may not be. */
    g_autofree char *d = g_strdup(desc);
    g_strdelimit(d, "\r\n", ' ');
    g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_COMMAND, "%s: %s: %s",
                command, klass, d);
  }
  return NULL;
}

/* One request, as a line. */
static char *
request_line(const char *command, JsonObject *arguments, gint64 id)
{
  g_autoptr(JsonObject) req = json_object_new();
  json_object_set_string_member(req, "execute", command);
  if (arguments != NULL)
    json_object_set_object_member(req, "arguments", json_object_ref(arguments));
  json_object_set_int_member(req, "id", id);
  g_autoptr(JsonNode) root = json_node_init_object(json_node_alloc(), req);
  g_autofree char *text = json_to_string(root, FALSE);
  return g_strconcat(text, "\n", NULL);
}

/* COMMAND was sent ahead and is the next one asked for: its ID. Any other
 * command asked for first makes the replies of those sent ahead late ones
 * to drop. */
static gboolean
take_ahead(QpQmp *qmp, const char *command, gint64 *id)
{
  Ahead *a = g_queue_peek_head(&qmp->ahead);
  if (a != NULL && strcmp(a->command, command) == 0) {
    *id = a->id;
    ahead_free(g_queue_pop_head(&qmp->ahead));
    return TRUE;
  }
  while ((a = g_queue_pop_head(&qmp->ahead)) != NULL) {
    if (!g_hash_table_remove(qmp->early, &a->id)) {
      gint64 *key = g_new(gint64, 1);
      *key = a->id;
      g_hash_table_add(qmp->abandoned, key);
    }
    ahead_free(a);
  }
  return FALSE;
}

/* TRUE when ID is that of a command sent ahead and not yet asked for. */
static gboolean
is_ahead_id(QpQmp *qmp, gint64 id)
{
  for (GList *l = qmp->ahead.head; l != NULL; l = l->next)
    if (((Ahead *)l->data)->id == id)
      return TRUE;
  return FALSE;
}

/* The reply to COMMAND, whose id is ID, waiting until DEADLINE: a new
 * reference, or NULL with LOCAL (I/O, timeout) or ERROR (protocol) set.
 * Events meanwhile are queued; replies to commands sent ahead are kept for
 * their turn. */
static JsonObject *
await_reply(QpQmp *qmp, const char *command, gint64 id, gint64 deadline,
            GError **local, GError **error)
{
  gpointer key, early;
  if (g_hash_table_steal_extended(qmp->early, &id, &key, &early)) {
    g_free(key);
    return early;
  }
  for (;;) {
    g_autoptr(JsonObject) obj = read_message(qmp, deadline, local);
    gboolean is_event;
    gint64 got;

    if (obj == NULL || !queue_if_event(qmp, obj, local, &is_event))
      return NULL;
    /* A command in flight when QEMU exits is not answered: QEMU hangs on
     * its way out instead (launcher/keeper/state.h, NUDGE_AFTER_MS). quit
     * itself is answered after its SHUTDOWN. */
    if (is_event && qmp->exiting && strcmp(command, "quit") != 0) {
      g_set_error(local, QP_QMP_ERROR, QP_QMP_ERROR_IO, "QEMU is exiting");
      return NULL;
    }
    if (is_event || is_abandoned_reply(qmp, obj))
      continue;
    if (!is_reply(obj)) {
      g_autofree char *ex = object_excerpt(obj);
      g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                  "%s: expected a reply or an event, got '%s'", command, ex);
      return NULL;
    }
    if (!reply_id(obj, &got)) {
      g_autofree char *ex = object_excerpt(obj);
      g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                  "%s: expected a reply with id %" G_GINT64_FORMAT
                  ", got one without an integer id: '%s'",
                  command, id, ex);
      return NULL;
    }
    if (got != id && is_ahead_id(qmp, got)) {
      gint64 *k = g_new(gint64, 1);
      *k = got;
      g_hash_table_replace(qmp->early, k, g_steal_pointer(&obj));
      continue;
    }
    if (got != id) {
      g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                  "%s: expected a reply with id %" G_GINT64_FORMAT
                  ", got id %" G_GINT64_FORMAT,
                  command, id, got);
      return NULL;
    }
    return g_steal_pointer(&obj);
  }
}

/* COMMAND (id ID) failed with LOCAL, an I/O error or a timeout: says so in
 * ERROR; a late reply to a timed-out command will be dropped. */
static JsonNode *
execute_failed(QpQmp *qmp, const char *command, gint64 id, GError *local,
               GError **error)
{
  if (g_error_matches(local, QP_QMP_ERROR, QP_QMP_ERROR_TIMEOUT)) {
    gint64 *key = g_new(gint64, 1);

    *key = id;
    g_hash_table_add(qmp->abandoned, key);
    g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_TIMEOUT,
                "no reply to '%s' within %u ms", command, qmp->timeout_ms);
    g_error_free(local);
    return NULL;
  }
  g_prefix_error(&local, "%s: ", command);
  g_propagate_error(error, local);
  return NULL;
}

JsonNode *
qp_qmp_execute(QpQmp *qmp, const char *command, JsonObject *arguments,
               GError **error)
{
  gint64 id = 0;
  gint64 deadline = deadline_after((int)MIN(qmp->timeout_ms, G_MAXINT));
  GError *local = NULL;

  g_return_val_if_fail(command != NULL, NULL);

  if (arguments == NULL && take_ahead(qmp, command, &id)) {
    /* Sent already: only its reply is awaited. */
  } else {
    id = qmp->next_id++;
    g_autofree char *line = request_line(command, arguments, id);
    if (!send_all(qmp, line, strlen(line), deadline, &local))
      return execute_failed(qmp, command, id, local, error);
  }
  GError *protocol = NULL;
  g_autoptr(JsonObject) obj =
      await_reply(qmp, command, id, deadline, &local, &protocol);
  if (obj == NULL && protocol != NULL) {
    g_clear_error(&local);
    g_propagate_error(error, protocol);
    return NULL;
  }
  if (obj == NULL)
    return execute_failed(qmp, command, id, local, error);
  if (json_object_has_member(obj, "error"))
    return error_reply(command, obj, error);
  return json_node_copy(json_object_get_member(obj, "return"));
}

gboolean
qp_qmp_handshake(QpQmp *qmp, GError **error)
{
  return qp_qmp_handshake_ahead(qmp, NULL, error);
}

/* Queues the commands AHEAD (no arguments) as sent, in one line each. */
static GString *
ahead_lines(QpQmp *qmp, const char *const *ahead)
{
  GString *lines = g_string_new(NULL);
  for (guint i = 0; ahead != NULL && ahead[i] != NULL; i++) {
    Ahead *a = g_new0(Ahead, 1);
    a->command = g_strdup(ahead[i]);
    a->id = qmp->next_id++;
    g_autofree char *line = request_line(a->command, NULL, a->id);
    g_string_append(lines, line);
    g_queue_push_tail(&qmp->ahead, a);
  }
  return lines;
}

gboolean
qp_qmp_handshake_ahead(QpQmp *qmp, const char *const *ahead, GError **error)
{
  gint64 deadline = deadline_after((int)MIN(qmp->timeout_ms, G_MAXINT));
  g_autoptr(GError) local = NULL;
  g_autoptr(JsonObject) greeting = read_message(qmp, deadline, &local);
  g_autoptr(JsonNode) ret = NULL;
  JsonNode *qmp_member;

  if (greeting == NULL) {
    if (g_error_matches(local, QP_QMP_ERROR, QP_QMP_ERROR_TIMEOUT))
      g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_TIMEOUT,
                  "QMP greeting: nothing received within %u ms",
                  qmp->timeout_ms);
    else
      g_propagate_prefixed_error(error, g_steal_pointer(&local),
                                 "QMP greeting: ");
    return FALSE;
  }
  qmp_member = json_object_get_member(greeting, "QMP");
  if (qmp_member == NULL || !JSON_NODE_HOLDS_OBJECT(qmp_member)) {
    g_autofree char *ex = object_excerpt(greeting);
    g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                "QMP greeting: expected an object with member 'QMP', got '%s'",
                ex);
    return FALSE;
  }

  /* qmp_capabilities and the commands sent ahead in one write: QEMU runs
   * them in order, the others once capabilities are negotiated. */
  Ahead *cap = g_new0(Ahead, 1);
  cap->command = g_strdup("qmp_capabilities");
  cap->id = qmp->next_id++;
  g_autofree char *cap_line = request_line(cap->command, NULL, cap->id);
  g_queue_push_head(&qmp->ahead, cap);
  g_autoptr(GString) lines = ahead_lines(qmp, ahead);
  g_string_prepend(lines, cap_line);
  if (!send_all(qmp, lines->str, lines->len, deadline, &local)) {
    g_propagate_prefixed_error(error, g_steal_pointer(&local),
                               "qmp_capabilities: ");
    return FALSE;
  }
  ret = qp_qmp_execute(qmp, "qmp_capabilities", NULL, error);
  if (ret == NULL)
    return FALSE;
  if (!JSON_NODE_HOLDS_OBJECT(ret) ||
      json_object_get_size(json_node_get_object(ret)) != 0) {
    g_autofree char *text = json_to_string(ret, FALSE);
    g_autofree char *ex = excerpt(text, strlen(text));
    g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                "qmp_capabilities: expected return {}, got '%s'", ex);
    return FALSE;
  }
  return TRUE;
}

JsonObject *
qp_qmp_next_event(QpQmp *qmp, int timeout_ms, GError **error)
{
  gint64 deadline = deadline_after(timeout_ms);

  for (;;) {
    g_autoptr(GError) local = NULL;
    g_autoptr(JsonObject) obj = NULL;
    gboolean is_event;

    if (!g_queue_is_empty(&qmp->events))
      return g_queue_pop_head(&qmp->events);

    obj = read_message(qmp, deadline, &local);
    if (obj == NULL) {
      if (g_error_matches(local, QP_QMP_ERROR, QP_QMP_ERROR_TIMEOUT))
        return NULL;
      g_propagate_prefixed_error(error, g_steal_pointer(&local),
                                 "QMP events: ");
      return NULL;
    }
    if (!queue_if_event(qmp, obj, &local, &is_event)) {
      g_propagate_prefixed_error(error, g_steal_pointer(&local),
                                 "QMP events: ");
      return NULL;
    }
    if (!is_event && !is_abandoned_reply(qmp, obj)) {
      g_autofree char *ex = object_excerpt(obj);
      g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                  "QMP events: expected an event, got '%s'", ex);
      return NULL;
    }
  }
}

/* ---- typed queries ---------------------------------------------------- */

/* Reads integer member NAME of OBJ into OUT. Absent: FALSE with no error if
 * !REQUIRED (OUT untouched). Values must lie in [MIN_VALUE, G_MAXINT]. */
static gboolean
int_member(JsonObject *obj, const char *name, gboolean required,
           gint64 min_value, int *out, const char *where, GError **error)
{
  JsonNode *node = json_object_get_member(obj, name);
  gint64 v;

  if (node == NULL) {
    if (required)
      g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                  "%s: expected member '%s', found none", where, name);
    return !required;
  }
  if (!JSON_NODE_HOLDS_VALUE(node) ||
      json_node_get_value_type(node) != G_TYPE_INT64) {
    g_autofree char *text = json_to_string(node, FALSE);
    g_autofree char *ex = excerpt(text, strlen(text));
    g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                "%s: expected an integer for '%s', got '%s'", where, name, ex);
    return FALSE;
  }
  v = json_node_get_int(node);
  if (v < min_value || v > G_MAXINT) {
    g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                "%s: expected '%s' in %" G_GINT64_FORMAT
                "..%d, got %" G_GINT64_FORMAT,
                where, name, min_value, G_MAXINT, v);
    return FALSE;
  }
  *out = (int)v;
  return TRUE;
}

static gboolean
string_member(JsonObject *obj, const char *name, gboolean required, char **out,
              const char *where, GError **error)
{
  JsonNode *node = json_object_get_member(obj, name);

  if (node == NULL) {
    if (required)
      g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                  "%s: expected member '%s', found none", where, name);
    return !required;
  }
  if (!JSON_NODE_HOLDS_VALUE(node) ||
      json_node_get_value_type(node) != G_TYPE_STRING) {
    g_autofree char *text = json_to_string(node, FALSE);
    g_autofree char *ex = excerpt(text, strlen(text));
    g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                "%s: expected a string for '%s', got '%s'", where, name, ex);
    return FALSE;
  }
  *out = g_strdup(json_node_get_string(node));
  return TRUE;
}

/* The returned array of COMMAND's reply, or NULL with an error. */
static JsonArray *
expect_array(const char *command, JsonNode *ret, GError **error)
{
  if (!JSON_NODE_HOLDS_ARRAY(ret)) {
    g_autofree char *text = json_to_string(ret, FALSE);
    g_autofree char *ex = excerpt(text, strlen(text));
    g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                "%s: expected an array, got '%s'", command, ex);
    return NULL;
  }
  return json_node_get_array(ret);
}

static JsonObject *
expect_element(const char *command, JsonArray *arr, guint i, GError **error)
{
  JsonNode *el = json_array_get_element(arr, i);

  if (!JSON_NODE_HOLDS_OBJECT(el)) {
    g_autofree char *text = json_to_string(el, FALSE);
    g_autofree char *ex = excerpt(text, strlen(text));
    g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                "%s: element %u: expected an object, got '%s'", command, i, ex);
    return NULL;
  }
  return json_node_get_object(el);
}

static void
vcpu_clear(gpointer p)
{
  QpVcpu *v = p;

  g_clear_pointer(&v->qom_path, g_free);
}

static void
iothread_clear(gpointer p)
{
  QpIothread *t = p;

  g_clear_pointer(&t->id, g_free);
}

GArray *
qp_qmp_parse_cpus(JsonNode *ret, GError **error)
{
  const char *cmd = "query-cpus-fast";
  g_autoptr(GArray) cpus = g_array_new(FALSE, TRUE, sizeof(QpVcpu));
  JsonArray *arr;

  g_array_set_clear_func(cpus, vcpu_clear);
  if ((arr = expect_array(cmd, ret, error)) == NULL)
    return NULL;

  for (guint i = 0; i < json_array_get_length(arr); i++) {
    JsonObject *el = expect_element(cmd, arr, i, error);
    g_autofree char *where = g_strdup_printf("%s: element %u", cmd, i);
    QpVcpu v = {.node_id = -1,
                .socket_id = -1,
                .die_id = -1,
                .cluster_id = -1,
                .core_id = -1,
                .smt_id = -1};
    JsonNode *props;

    if (el == NULL)
      return NULL;
    if (!int_member(el, "cpu-index", TRUE, 0, &v.cpu_index, where, error) ||
        !int_member(el, "thread-id", TRUE, 1, &v.thread_id, where, error))
      return NULL;
    /* Append first so that the clear func owns qom_path from here on. */
    g_array_append_val(cpus, v);
    if (!string_member(el, "qom-path", FALSE,
                       &g_array_index(cpus, QpVcpu, cpus->len - 1).qom_path,
                       where, error))
      return NULL;

    props = json_object_get_member(el, "props");
    if (props != NULL) {
      QpVcpu *pv = &g_array_index(cpus, QpVcpu, cpus->len - 1);
      g_autofree char *pwhere = g_strdup_printf("%s: props", where);
      JsonObject *p;

      if (!JSON_NODE_HOLDS_OBJECT(props)) {
        g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                    "%s: expected an object for 'props'", where);
        return NULL;
      }
      p = json_node_get_object(props);
      /* Unknown members (newer QEMU) are ignored. */
      if (!int_member(p, "node-id", FALSE, 0, &pv->node_id, pwhere, error) ||
          !int_member(p, "socket-id", FALSE, 0, &pv->socket_id, pwhere,
                      error) ||
          !int_member(p, "die-id", FALSE, 0, &pv->die_id, pwhere, error) ||
          !int_member(p, "cluster-id", FALSE, 0, &pv->cluster_id, pwhere,
                      error) ||
          !int_member(p, "core-id", FALSE, 0, &pv->core_id, pwhere, error) ||
          !int_member(p, "thread-id", FALSE, 0, &pv->smt_id, pwhere, error))
        return NULL;
    }
  }
  return g_steal_pointer(&cpus);
}

GArray *
qp_qmp_parse_iothreads(JsonNode *ret, GError **error)
{
  const char *cmd = "query-iothreads";
  g_autoptr(GArray) threads = g_array_new(FALSE, TRUE, sizeof(QpIothread));
  JsonArray *arr;

  g_array_set_clear_func(threads, iothread_clear);
  if ((arr = expect_array(cmd, ret, error)) == NULL)
    return NULL;

  for (guint i = 0; i < json_array_get_length(arr); i++) {
    JsonObject *el = expect_element(cmd, arr, i, error);
    g_autofree char *where = g_strdup_printf("%s: element %u", cmd, i);
    QpIothread t = {0};

    if (el == NULL)
      return NULL;
    if (!int_member(el, "thread-id", TRUE, 1, &t.thread_id, where, error))
      return NULL;
    if (!string_member(el, "id", TRUE, &t.id, where, error))
      return NULL;
    g_array_append_val(threads, t);
  }
  return g_steal_pointer(&threads);
}

GArray *
qp_qmp_query_cpus(QpQmp *qmp, GError **error)
{
  g_autoptr(JsonNode) ret = qp_qmp_execute(qmp, "query-cpus-fast", NULL, error);

  if (ret == NULL)
    return NULL;
  return qp_qmp_parse_cpus(ret, error);
}

GArray *
qp_qmp_query_iothreads(QpQmp *qmp, GError **error)
{
  g_autoptr(JsonNode) ret = qp_qmp_execute(qmp, "query-iothreads", NULL, error);

  if (ret == NULL)
    return NULL;
  return qp_qmp_parse_iothreads(ret, error);
}
