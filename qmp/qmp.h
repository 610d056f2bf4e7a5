/* A small QMP client over a connected stream fd (our end of the socketpair).
 * Synchronous commands with a timeout; events received meanwhile are queued
 * and handed out by qp_qmp_next_event(). */
#pragma once

#include <glib.h>

#include "qp-error.h"
#include "topology/base/jvalue.h"

G_BEGIN_DECLS

typedef struct QpQmp QpQmp;

/* Takes ownership of FD. TIMEOUT_MS bounds every wait for the peer. */
QpQmp *qp_qmp_new(int fd, guint timeout_ms);
void qp_qmp_free(QpQmp *qmp);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QpQmp, qp_qmp_free)

int qp_qmp_get_fd(const QpQmp *qmp);

/* The longest wait for a reply (or the greeting) from now on. */
void qp_qmp_set_timeout(QpQmp *qmp, guint timeout_ms);

/* Microseconds spent so far blocked waiting for the peer (the rest of a
 * client's time is its own). */
gint64 qp_qmp_waited_us(const QpQmp *qmp);

/* Reads the greeting and negotiates capabilities. */
gboolean qp_qmp_handshake(QpQmp *qmp, GError **error);

/* The same, sending in the same write the commands AHEAD (NULL-terminated,
 * without arguments): the next qp_qmp_execute() of each, in that order,
 * only waits for its reply, one round trip saved per command. A command
 * asked for out of order drops the replies of those sent ahead of it. */
gboolean qp_qmp_handshake_ahead(QpQmp *qmp, const char *const *ahead,
                                GError **error);

/* Runs COMMAND with ARGUMENTS (an object, or NULL; not consumed) and
 * returns its "return" member (the caller's). */
QpJv *qp_qmp_execute(QpQmp *qmp, const char *command, const QpJv *arguments,
                     GError **error);

/* The next event (the whole message, the caller's), waiting up to
 * TIMEOUT_MS (-1: forever). NULL without error on timeout; NULL with error on
 * I/O or protocol failure (peer closed: QP_QMP_ERROR_IO). */
QpJv *qp_qmp_next_event(QpQmp *qmp, int timeout_ms, GError **error);

/* TRUE if an event is already queued (poll() on the fd would not show it). */
gboolean qp_qmp_has_event(const QpQmp *qmp);

/* Whether EV is a SHUTDOWN after which QEMU exits whatever -no-shutdown
 * says (a host signal, quit). */
gboolean qp_qmp_event_is_exit(const QpJv *ev);

/* Whether such a SHUTDOWN came: from then on a command awaiting its reply
 * fails at once (QP_QMP_ERROR_IO), since QEMU will not answer it. */
gboolean qp_qmp_exiting(const QpQmp *qmp);

typedef struct {
  int cpu_index;
  int thread_id;
  int node_id;                                        /* -1 if absent */
  int socket_id, die_id, cluster_id, core_id, smt_id; /* -1 if absent */
  char *qom_path;
} QpVcpu;

typedef struct {
  char *id;
  int thread_id;
} QpIothread;

/* query-cpus-fast: GArray of QpVcpu (with a clear func). */
GArray *qp_qmp_query_cpus(QpQmp *qmp, GError **error);
/* query-iothreads: GArray of QpIothread (with a clear func). */
GArray *qp_qmp_query_iothreads(QpQmp *qmp, GError **error);

/* Additions for tests and fuzzing (the reader without the socket). */

/* Parses one line from the peer (without its line end): a JSON object, or
 * NULL with QP_QMP_ERROR_PROTOCOL naming a short excerpt of the line. */
QpJv *qp_qmp_parse_line(const char *line, gsize len, GError **error);
/* The "return" member of query-cpus-fast / query-iothreads as the arrays
 * above (QP_QMP_ERROR_PROTOCOL if it does not have the documented shape). */
GArray *qp_qmp_parse_cpus(const QpJv *ret, GError **error);
GArray *qp_qmp_parse_iothreads(const QpJv *ret, GError **error);

G_END_DECLS
