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
/* The reader's own bound on nesting (jvalue.h), checked first so that the
 * error says so; QEMU's replies and events nest a few levels. */
#define QP_QMP_MAX_DEPTH QP_JV_MAX_DEPTH
#define QP_QMP_EXCERPT 48

struct QpQmp {
  int fd;
  guint timeout_ms;
  GString *in;       /* bytes read and not yet consumed */
  gsize scanned;     /* bytes of IN known to hold no '\n' */
  gboolean eof;      /* the peer closed its end */
  gboolean skipping; /* the rest of a message too long is dropped */
  GQueue events;     /* of QpJv *, each a whole message */
  gint64 next_id;
  GHashTable *abandoned; /* ids of commands that timed out */
  GQueue ahead;          /* of Ahead *: sent, reply not yet asked for */
  gint64 waited_us;      /* blocked waiting for the peer, in all */
  GHashTable *early;     /* id -> QpJv: replies to commands sent ahead
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
                                     (GDestroyNotify)qp_jv_free);
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
  g_queue_clear_full(&qmp->events, (GDestroyNotify)qp_jv_free);
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

QpJv *
qp_qmp_parse_line(const char *line, gsize len, GError **error)
{
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

  g_autoptr(QpJv) root = qp_jv_parse(line, (gssize)len, NULL);
  if (!qp_jv_is(root, QP_JV_OBJECT)) {
    g_autofree char *ex = excerpt(line, len);
    g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                "expected a JSON object, got '%s'", ex);
    return NULL;
  }
  return g_steal_pointer(&root);
}

/* A value as a short one-line excerpt, for errors. */
static char *
value_excerpt(const QpJv *v)
{
  g_autofree char *text = qp_jv_write(v, FALSE);

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
static QpJv *
read_message(QpQmp *qmp, gint64 deadline, GError **error)
{
  for (;;) {
    while (qmp->skipping && qmp->in->len > 0) {
      char *end = memchr(qmp->in->str, '\n', qmp->in->len);
      if (end == NULL) {
        g_string_truncate(qmp->in, 0);
        break;
      }
      g_string_erase(qmp->in, 0, end - qmp->in->str + 1);
      qmp->skipping = FALSE;
    }
    char *nl =
        memchr(qmp->in->str + qmp->scanned, '\n', qmp->in->len - qmp->scanned);

    if (nl != NULL) {
      gsize len = (gsize)(nl - qmp->in->str);
      gsize consumed = len + 1;
      QpJv *obj = NULL;
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
      /* The rest of that message is dropped as it comes, so that a
       * reader that goes on gets the messages after it; the buffer that
       * held it goes too. */
      g_string_free(qmp->in, TRUE);
      qmp->in = g_string_sized_new(4096);
      qmp->scanned = 0;
      qmp->skipping = TRUE;
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

/* Member NAME of OBJ if it is a string, else NULL. */
static const char *
string_or_null(const QpJv *obj, const char *name)
{
  return qp_jv_get_string(qp_jv_get(obj, name));
}

/* TRUE if *OBJ is an event: queued, and *OBJ taken (NULL). */
static gboolean
queue_if_event(QpQmp *qmp, QpJv **obj, GError **error, gboolean *is_event)
{
  *is_event = FALSE;
  if (qp_jv_get(*obj, "event") == NULL)
    return TRUE;
  if (string_or_null(*obj, "event") == NULL) {
    g_autofree char *ex = value_excerpt(*obj);
    g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                "expected an event name string, got '%s'", ex);
    return FALSE;
  }
  *is_event = TRUE;
  qmp->exiting |= qp_qmp_event_is_exit(*obj);
  g_queue_push_tail(&qmp->events, g_steal_pointer(obj));
  return TRUE;
}

gboolean
qp_qmp_event_is_exit(const QpJv *ev)
{
  if (g_strcmp0(string_or_null(ev, "event"), "SHUTDOWN") != 0)
    return FALSE;
  const char *reason = string_or_null(qp_jv_get(ev, "data"), "reason");
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
reply_id(const QpJv *obj, gint64 *id)
{
  QpJv *node = qp_jv_get(obj, "id");

  if (!qp_jv_is(node, QP_JV_INT))
    return FALSE;
  *id = qp_jv_get_int(node);
  return TRUE;
}

static gboolean
is_reply(const QpJv *obj)
{
  return qp_jv_get(obj, "return") != NULL || qp_jv_get(obj, "error") != NULL;
}

/* A late reply to a command we gave up on: drop it. */
static gboolean
is_abandoned_reply(QpQmp *qmp, const QpJv *obj)
{
  gint64 id;

  return is_reply(obj) && reply_id(obj, &id) &&
         g_hash_table_remove(qmp->abandoned, &id);
}

static QpJv *
error_reply(const char *command, const QpJv *obj, GError **error)
{
  QpJv *eobj = qp_jv_get(obj, "error");
  const char *klass, *desc;

  if (!qp_jv_is(eobj, QP_JV_OBJECT)) {
    g_autofree char *ex = value_excerpt(obj);
    g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                "%s: expected an error object, got '%s'", command, ex);
    return NULL;
  }
  klass = string_or_null(eobj, "class");
  desc = string_or_null(eobj, "desc");
  if (klass == NULL || desc == NULL) {
    g_autofree char *ex = value_excerpt(obj);
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

/* One request, as a line: {"execute":...,"arguments":...,"id":...}. The
 * arguments are the caller's: written, not taken. */
static char *
request_line(const char *command, const QpJv *arguments, gint64 id)
{
  GString *line = g_string_new("{\"execute\":");
  g_autoptr(QpJv) name = qp_jv_string(command);
  qp_jv_write_to(line, name, FALSE);
  if (arguments != NULL) {
    g_string_append(line, ",\"arguments\":");
    qp_jv_write_to(line, arguments, FALSE);
  }
  g_string_append_printf(line, ",\"id\":%" G_GINT64_FORMAT "}\n", id);
  return g_string_free(line, FALSE);
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
static QpJv *
await_reply(QpQmp *qmp, const char *command, gint64 id, gint64 deadline,
            GError **local, GError **error)
{
  gpointer key, early;
  if (g_hash_table_steal_extended(qmp->early, &id, &key, &early)) {
    g_free(key);
    return early;
  }
  for (;;) {
    g_autoptr(QpJv) obj = read_message(qmp, deadline, local);
    gboolean is_event;
    gint64 got;

    if (obj == NULL || !queue_if_event(qmp, &obj, local, &is_event))
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
      g_autofree char *ex = value_excerpt(obj);
      g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                  "%s: expected a reply or an event, got '%s'", command, ex);
      return NULL;
    }
    if (!reply_id(obj, &got)) {
      g_autofree char *ex = value_excerpt(obj);
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
static QpJv *
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

QpJv *
qp_qmp_execute(QpQmp *qmp, const char *command, const QpJv *arguments,
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
  g_autoptr(QpJv) obj =
      await_reply(qmp, command, id, deadline, &local, &protocol);
  if (obj == NULL && protocol != NULL) {
    g_clear_error(&local);
    g_propagate_error(error, protocol);
    return NULL;
  }
  if (obj == NULL)
    return execute_failed(qmp, command, id, local, error);
  if (qp_jv_get(obj, "error") != NULL)
    return error_reply(command, obj, error);
  return qp_jv_take(obj, "return");
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
  g_autoptr(QpJv) greeting = read_message(qmp, deadline, &local);
  g_autoptr(QpJv) ret = NULL;

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
  if (!qp_jv_is(qp_jv_get(greeting, "QMP"), QP_JV_OBJECT)) {
    g_autofree char *ex = value_excerpt(greeting);
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
  if (!qp_jv_is(ret, QP_JV_OBJECT) || qp_jv_len(ret) != 0) {
    g_autofree char *ex = value_excerpt(ret);
    g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                "qmp_capabilities: expected return {}, got '%s'", ex);
    return FALSE;
  }
  return TRUE;
}

QpJv *
qp_qmp_next_event(QpQmp *qmp, int timeout_ms, GError **error)
{
  gint64 deadline = deadline_after(timeout_ms);

  for (;;) {
    g_autoptr(GError) local = NULL;
    g_autoptr(QpJv) obj = NULL;
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
    if (!queue_if_event(qmp, &obj, &local, &is_event)) {
      g_propagate_prefixed_error(error, g_steal_pointer(&local),
                                 "QMP events: ");
      return NULL;
    }
    if (!is_event && !is_abandoned_reply(qmp, obj)) {
      g_autofree char *ex = value_excerpt(obj);
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
int_member(const QpJv *obj, const char *name, gboolean required,
           gint64 min_value, int *out, const char *where, GError **error)
{
  QpJv *node = qp_jv_get(obj, name);
  gint64 v;

  if (node == NULL) {
    if (required)
      g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                  "%s: expected member '%s', found none", where, name);
    return !required;
  }
  if (!qp_jv_is(node, QP_JV_INT)) {
    g_autofree char *ex = value_excerpt(node);
    g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                "%s: expected an integer for '%s', got '%s'", where, name, ex);
    return FALSE;
  }
  v = qp_jv_get_int(node);
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
string_member(const QpJv *obj, const char *name, gboolean required, char **out,
              const char *where, GError **error)
{
  QpJv *node = qp_jv_get(obj, name);

  if (node == NULL) {
    if (required)
      g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                  "%s: expected member '%s', found none", where, name);
    return !required;
  }
  if (!qp_jv_is(node, QP_JV_STRING)) {
    g_autofree char *ex = value_excerpt(node);
    g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                "%s: expected a string for '%s', got '%s'", where, name, ex);
    return FALSE;
  }
  *out = g_strdup(qp_jv_get_string(node));
  return TRUE;
}

/* COMMAND's reply RET if it is an array, else NULL with an error. */
static const QpJv *
expect_array(const char *command, const QpJv *ret, GError **error)
{
  if (!qp_jv_is(ret, QP_JV_ARRAY)) {
    g_autofree char *ex = value_excerpt(ret);
    g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                "%s: expected an array, got '%s'", command, ex);
    return NULL;
  }
  return ret;
}

static const QpJv *
expect_element(const char *command, const QpJv *arr, guint i, GError **error)
{
  QpJv *el = qp_jv_item(arr, i);

  if (!qp_jv_is(el, QP_JV_OBJECT)) {
    g_autofree char *ex = value_excerpt(el);
    g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                "%s: element %u: expected an object, got '%s'", command, i, ex);
    return NULL;
  }
  return el;
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
qp_qmp_parse_cpus(const QpJv *ret, GError **error)
{
  const char *cmd = "query-cpus-fast";
  g_autoptr(GArray) cpus = g_array_new(FALSE, TRUE, sizeof(QpVcpu));
  const QpJv *arr;

  g_array_set_clear_func(cpus, vcpu_clear);
  if ((arr = expect_array(cmd, ret, error)) == NULL)
    return NULL;

  for (guint i = 0; i < qp_jv_len(arr); i++) {
    const QpJv *el = expect_element(cmd, arr, i, error);
    g_autofree char *where = g_strdup_printf("%s: element %u", cmd, i);
    QpVcpu v = {.node_id = -1,
                .socket_id = -1,
                .die_id = -1,
                .cluster_id = -1,
                .core_id = -1,
                .smt_id = -1};
    const QpJv *props;

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

    props = qp_jv_get(el, "props");
    if (props != NULL) {
      QpVcpu *pv = &g_array_index(cpus, QpVcpu, cpus->len - 1);
      g_autofree char *pwhere = g_strdup_printf("%s: props", where);
      const QpJv *p = props;

      if (!qp_jv_is(props, QP_JV_OBJECT)) {
        g_set_error(error, QP_QMP_ERROR, QP_QMP_ERROR_PROTOCOL,
                    "%s: expected an object for 'props'", where);
        return NULL;
      }
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
qp_qmp_parse_iothreads(const QpJv *ret, GError **error)
{
  const char *cmd = "query-iothreads";
  g_autoptr(GArray) threads = g_array_new(FALSE, TRUE, sizeof(QpIothread));
  const QpJv *arr;

  g_array_set_clear_func(threads, iothread_clear);
  if ((arr = expect_array(cmd, ret, error)) == NULL)
    return NULL;

  for (guint i = 0; i < qp_jv_len(arr); i++) {
    const QpJv *el = expect_element(cmd, arr, i, error);
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
  g_autoptr(QpJv) ret = qp_qmp_execute(qmp, "query-cpus-fast", NULL, error);

  if (ret == NULL)
    return NULL;
  return qp_qmp_parse_cpus(ret, error);
}

GArray *
qp_qmp_query_iothreads(QpQmp *qmp, GError **error)
{
  g_autoptr(QpJv) ret = qp_qmp_execute(qmp, "query-iothreads", NULL, error);

  if (ret == NULL)
    return NULL;
  return qp_qmp_parse_iothreads(ret, error);
}
