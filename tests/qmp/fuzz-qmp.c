/* libFuzzer target for the QMP reader (meson -Dfuzzing=true, clang).
 *
 * The input is what a hostile or broken peer sends, whole: it is written into
 * a socketpair before the client runs a keeper-like conversation against it
 * (greeting, capabilities, query-cpus-fast, query-iothreads, events), so the
 * line splitting, the size and nesting caps, the JSON parsing, the id
 * matching, the event queue and the typed parsers all see it. Seeds are in
 * fuzz-corpus/. */
#include "qmp/qmp.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
  int sv[2];
  int bufsz = 1 << 20;
  GError *e = NULL;
  QpQmp *q;

  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
    abort();
  if (size > 100000)
    size = 100000; /* what fits in the socket buffer at once */
  setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &bufsz, sizeof bufsz);
  if (size > 0 && write(sv[0], data, size) != (ssize_t)size) {
    close(sv[0]);
    close(sv[1]);
    return 0;
  }
  shutdown(sv[0], SHUT_WR);

  q = qp_qmp_new(sv[1], 0);
  if (qp_qmp_handshake(q, &e)) {
    GArray *a = qp_qmp_query_cpus(q, &e);

    if (a != NULL)
      g_array_unref(a);
    g_clear_error(&e);
    a = qp_qmp_query_iothreads(q, &e);
    if (a != NULL)
      g_array_unref(a);
    g_clear_error(&e);
    for (int i = 0; i < 16; i++) {
      QpJv *o = qp_qmp_next_event(q, 0, &e);

      if (o == NULL)
        break;
      qp_jv_free(o);
    }
  }
  g_clear_error(&e);
  qp_qmp_free(q);
  close(sv[0]);
  return 0;
}
