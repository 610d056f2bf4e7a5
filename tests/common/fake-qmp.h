/* A scripted QMP peer for fault tests.
 *
 * fake_qmp_start() serves one end of a socketpair from a thread of the test
 * process and hands the other end to the test; tests/common/fake-qemu.c runs
 * the same server as a stand-in QEMU binary (see the comment there).
 *
 * In every behaviour the peer answers like QEMU 7.2: a greeting, replies that
 * echo the request's "id", events with a timestamp, "\r\n" line ends. The
 * behaviour only changes what it does at one point of the conversation. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef enum {
  FAKE_QMP_NORMAL,
  FAKE_QMP_NO_GREETING,          /* says nothing at all (reads and ignores) */
  FAKE_QMP_GARBAGE,              /* non-JSON instead of the greeting, or
                                    instead of the reply to `command` */
  FAKE_QMP_COMMAND_ERROR,        /* `command` gets an error reply */
  FAKE_QMP_NEVER_REPLY,          /* `command` gets no reply at all */
  FAKE_QMP_CLOSE_AFTER_GREETING, /* greeting, then closes its end */
  FAKE_QMP_VANISH_THREADS,       /* query-cpus-fast reports threads that
                                    have already exited */
  FAKE_QMP_EXIT_DURING_STARTUP,  /* greeting, then ends: fake-qemu exits 1 */
  FAKE_QMP_EXIT_AT,              /* `command` gets no reply: fake-qemu exits
                                    0 on it, a guest that powered off then */
  FAKE_QMP_MEMDEV_RACE,          /* a 128 MiB DIMM (dimm1 on backend hm1)
                                    plugged after the start, whose backend
                                    QOM does not have at the first qom-get
                                    (deleted right after query-memdev) and
                                    has from the second on (made again
                                    under the same id, with its DIMM) */
} FakeQmpBehaviour;

typedef struct {
  FakeQmpBehaviour behaviour;
  /* The command COMMAND_ERROR / NEVER_REPLY / GARBAGE act on (GARBAGE with
   * NULL: the greeting is garbage). */
  const char *command;
  const char *error_class; /* COMMAND_ERROR; default "GenericError" */
  const char *error_desc;  /* COMMAND_ERROR; default "injected failure" */
  /* vCPUs. With thread_ids, query-cpus-fast reports those n_vcpus ids as
   * they are; without, the peer starts n_vcpus real threads (default 1)
   * and reports their tids. */
  guint n_vcpus;
  const int *thread_ids;
  /* iothread ids (NULL-terminated); each gets a real thread. */
  const char *const *iothreads;
  /* Events (NULL-terminated names) sent just before the reply to
   * events_before (e.g. {"STOP", "RESUME"} before "query-status"). */
  const char *events_before;
  const char *const *events;
  gboolean paused; /* query-status: "prelaunch" until cont */
  int log_fd;      /* if > 0: each command name received, a line */
} FakeQmpScript;

typedef struct FakeQmp FakeQmp;

/* Starts the peer in a thread; *CLIENT_FD gets the test's end (a
 * SOCK_STREAM socket, close-on-exec; the caller owns it). The strings and
 * arrays SCRIPT points to must outlive the peer. */
FakeQmp *fake_qmp_start(const FakeQmpScript *script, int *client_fd);
/* Sends event NAME now (e.g. "RESUME"), between messages. */
void fake_qmp_emit_event(FakeQmp *fake, const char *name);
/* Names of the commands received so far, in order (free with g_strfreev). */
char **fake_qmp_dup_commands(FakeQmp *fake);
/* The tids query-cpus-fast reports (valid until fake_qmp_stop). */
const int *fake_qmp_get_vcpu_tids(FakeQmp *fake, guint *n);
/* Makes query-cpus-fast report TID for vCPU INDEX (< the number of vCPUs)
 * instead of the peer's own thread: e.g. a thread of another process. */
void fake_qmp_set_vcpu_tid(FakeQmp *fake, guint index, int tid);
/* Closes the peer's end, stops its threads and frees it. */
void fake_qmp_stop(FakeQmp *fake);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FakeQmp, fake_qmp_stop)

/* Lower level, for fake-qemu: serve FD in the calling thread. */
typedef enum {
  FAKE_QMP_END_CLOSED, /* the client closed (or STOP_FD became readable) */
  FAKE_QMP_END_QUIT,   /* "quit" was answered */
  FAKE_QMP_END_EXIT,   /* EXIT_DURING_STARTUP: exit now */
} FakeQmpEnd;

/* Serves FD (not closed) until the end; STOP_FD (-1: none) readable stops
 * it. FAKE must come from fake_qmp_new_peer(). */
FakeQmp *fake_qmp_new_peer(const FakeQmpScript *script, int fd);
FakeQmpEnd fake_qmp_serve(FakeQmp *fake, int stop_fd);
void fake_qmp_free_peer(FakeQmp *fake);

/* Behaviour by name ("normal", "no-greeting", "garbage", "command-error",
 * "never-reply", "close-after-greeting", "vanish-threads",
 * "exit-during-startup"); FALSE if unknown. */
gboolean fake_qmp_behaviour_from_name(const char *name, FakeQmpBehaviour *out);

G_END_DECLS
