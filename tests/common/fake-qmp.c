/* A scripted QMP peer for fault tests: see fake-qmp.h. */
#include "tests/common/fake-qmp.h"

#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <json-glib/json-glib.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A thread of ours that stands in for a vCPU or an iothread. */
typedef struct {
  GThread *thread;
  char *name;
  int tid;
  gboolean exit_at_once;
  int wake_fd; /* readable when it must end */
  GMutex lock;
  GCond cond;
  gboolean started;
} Worker;

struct FakeQmp {
  FakeQmpScript script;
  int fd;
  int stop_pipe[2];    /* fake_qmp_start(): wakes the serving thread */
  int workers_pipe[2]; /* closing the write end ends the workers */
  GThread *thread;
  GMutex lock; /* writes to fd, commands */
  GPtrArray *commands;
  GPtrArray *workers; /* of Worker * */
  GArray *vcpu_tids;
  GArray *iothread_tids;
  gboolean running;
  gboolean ever_ran;
  guint qom_gets; /* MEMDEV_RACE: qom-get asked so far */
};

/* ---- worker threads --------------------------------------------------- */

static gpointer
worker_main(gpointer data)
{
  Worker *w = data;
  char c;

  g_mutex_lock(&w->lock);
  w->tid = (int)syscall(SYS_gettid);
  w->started = TRUE;
  g_cond_signal(&w->cond);
  g_mutex_unlock(&w->lock);
  if (w->exit_at_once)
    return NULL;
  while (read(w->wake_fd, &c, 1) < 0 && errno == EINTR)
    ;
  return NULL;
}

/* pthread_join() returns once the thread woke its joiner, which the
 * kernel does before the task is gone: /proc/self/task/TID can outlive the
 * join by a moment. A thread that "vanished" must be gone from /proc before
 * query-cpus-fast names it, as a real exited thread is. */
static void
wait_task_gone(int tid)
{
  g_autofree char *path = g_strdup_printf("/proc/self/task/%d", tid);

  for (int i = 0; i < 10000 && access(path, F_OK) == 0; i++)
    g_usleep(1000);
  if (access(path, F_OK) == 0)
    g_error("fake-qmp: thread %d still in /proc 10 s after it ended", tid);
}

static Worker *
worker_start(FakeQmp *fake, const char *name, gboolean exit_at_once)
{
  Worker *w = g_new0(Worker, 1);

  w->name = g_strdup(name);
  w->exit_at_once = exit_at_once;
  w->wake_fd = fake->workers_pipe[0];
  g_mutex_init(&w->lock);
  g_cond_init(&w->cond);
  /* GThread names the thread (comm), like QEMU's "CPU 0/TCG". */
  w->thread = g_thread_new(name, worker_main, w);
  g_mutex_lock(&w->lock);
  while (!w->started)
    g_cond_wait(&w->cond, &w->lock);
  g_mutex_unlock(&w->lock);
  if (exit_at_once) {
    g_clear_pointer(&w->thread, g_thread_join);
    wait_task_gone(w->tid);
  }
  g_ptr_array_add(fake->workers, w);
  return w;
}

static void
worker_free(gpointer data)
{
  Worker *w = data;

  if (w->thread != NULL)
    g_thread_join(w->thread);
  g_mutex_clear(&w->lock);
  g_cond_clear(&w->cond);
  g_free(w->name);
  g_free(w);
}

/* ---- peer ------------------------------------------------------------- */

gboolean
fake_qmp_behaviour_from_name(const char *name, FakeQmpBehaviour *out)
{
  static const struct {
    const char *name;
    FakeQmpBehaviour b;
  } names[] = {
      {"normal", FAKE_QMP_NORMAL},
      {"no-greeting", FAKE_QMP_NO_GREETING},
      {"garbage", FAKE_QMP_GARBAGE},
      {"command-error", FAKE_QMP_COMMAND_ERROR},
      {"never-reply", FAKE_QMP_NEVER_REPLY},
      {"close-after-greeting", FAKE_QMP_CLOSE_AFTER_GREETING},
      {"vanish-threads", FAKE_QMP_VANISH_THREADS},
      {"exit-during-startup", FAKE_QMP_EXIT_DURING_STARTUP},
      {"exit-at", FAKE_QMP_EXIT_AT},
      {"memdev-race", FAKE_QMP_MEMDEV_RACE},
  };

  for (gsize i = 0; i < G_N_ELEMENTS(names); i++) {
    if (g_str_equal(name, names[i].name)) {
      *out = names[i].b;
      return TRUE;
    }
  }
  return FALSE;
}

FakeQmp *
fake_qmp_new_peer(const FakeQmpScript *script, int fd)
{
  FakeQmp *fake = g_new0(FakeQmp, 1);
  guint n_vcpus;

  fake->script = *script;
  fake->fd = fd;
  fake->stop_pipe[0] = fake->stop_pipe[1] = -1;
  g_mutex_init(&fake->lock);
  fake->commands = g_ptr_array_new_with_free_func(g_free);
  fake->workers = g_ptr_array_new_with_free_func(worker_free);
  fake->vcpu_tids = g_array_new(FALSE, FALSE, sizeof(int));
  fake->iothread_tids = g_array_new(FALSE, FALSE, sizeof(int));
  fake->running = !script->paused;
  fake->ever_ran = fake->running;
  if (!g_unix_open_pipe(fake->workers_pipe, FD_CLOEXEC, NULL))
    g_error("fake-qmp: pipe: %s", g_strerror(errno));

  n_vcpus = script->n_vcpus > 0 ? script->n_vcpus : 1;
  if (script->thread_ids != NULL) {
    g_array_append_vals(fake->vcpu_tids, script->thread_ids, script->n_vcpus);
  } else {
    gboolean vanish = script->behaviour == FAKE_QMP_VANISH_THREADS;

    for (guint i = 0; i < n_vcpus; i++) {
      g_autofree char *name = g_strdup_printf("CPU %u/TCG", i);
      Worker *w = worker_start(fake, name, vanish);
      g_array_append_val(fake->vcpu_tids, w->tid);
    }
  }
  for (guint i = 0; script->iothreads != NULL && script->iothreads[i]; i++) {
    g_autofree char *name = g_strdup_printf("IO %s", script->iothreads[i]);
    Worker *w = worker_start(fake, name, FALSE);
    g_array_append_val(fake->iothread_tids, w->tid);
  }
  return fake;
}

void
fake_qmp_free_peer(FakeQmp *fake)
{
  if (fake == NULL)
    return;
  close(fake->workers_pipe[1]); /* wakes every worker */
  g_ptr_array_free(fake->workers, TRUE);
  close(fake->workers_pipe[0]);
  g_ptr_array_free(fake->commands, TRUE);
  g_array_free(fake->vcpu_tids, TRUE);
  g_array_free(fake->iothread_tids, TRUE);
  g_mutex_clear(&fake->lock);
  g_free(fake);
}

void
fake_qmp_set_vcpu_tid(FakeQmp *fake, guint index, int tid)
{
  g_return_if_fail(index < fake->vcpu_tids->len);
  g_array_index(fake->vcpu_tids, int, index) = tid;
}

const int *
fake_qmp_get_vcpu_tids(FakeQmp *fake, guint *n)
{
  *n = fake->vcpu_tids->len;
  return (const int *)(gpointer)fake->vcpu_tids->data;
}

char **
fake_qmp_dup_commands(FakeQmp *fake)
{
  GPtrArray *out = g_ptr_array_new();

  g_mutex_lock(&fake->lock);
  for (guint i = 0; i < fake->commands->len; i++)
    g_ptr_array_add(out, g_strdup(g_ptr_array_index(fake->commands, i)));
  g_mutex_unlock(&fake->lock);
  g_ptr_array_add(out, NULL);
  return (char **)g_ptr_array_free(out, FALSE);
}

/* Writes TEXT plus "\r\n" (errors ignored: the client may be gone). */
static void
send_line(FakeQmp *fake, const char *text)
{
  g_autofree char *line = g_strconcat(text, "\r\n", NULL);
  const char *p = line;
  gsize len = strlen(line);

  g_mutex_lock(&fake->lock);
  while (len > 0) {
    ssize_t n = send(fake->fd, p, len, MSG_NOSIGNAL);

    if (n < 0 && errno == ENOTSOCK)
      n = write(fake->fd, p, len);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    p += n;
    len -= (gsize)n;
  }
  g_mutex_unlock(&fake->lock);
}

static void
send_object(FakeQmp *fake, JsonObject *obj)
{
  g_autoptr(JsonNode) node = json_node_init_object(json_node_alloc(), obj);
  g_autofree char *text = json_to_string(node, FALSE);

  send_line(fake, text);
}

static void
send_event(FakeQmp *fake, const char *name, JsonObject *data)
{
  g_autoptr(JsonObject) ev = json_object_new();
  JsonObject *ts = json_object_new();
  gint64 now = g_get_real_time();

  json_object_set_int_member(ts, "seconds", now / G_USEC_PER_SEC);
  json_object_set_int_member(ts, "microseconds", now % G_USEC_PER_SEC);
  json_object_set_object_member(ev, "timestamp", ts);
  json_object_set_string_member(ev, "event", name);
  if (data != NULL)
    json_object_set_object_member(ev, "data", json_object_ref(data));
  send_object(fake, ev);
}

void
fake_qmp_emit_event(FakeQmp *fake, const char *name)
{
  send_event(fake, name, NULL);
}

static void
send_greeting(FakeQmp *fake)
{
  send_line(fake,
            "{\"QMP\": {\"version\": {\"qemu\": {\"micro\": 0, \"minor\": 2, "
            "\"major\": 7}, \"package\": \"fake-qmp\"}, \"capabilities\": "
            "[\"oob\"]}}");
}

static const char garbage[] = "this is not JSON {\"QMP\": oops";

/* Nodes that take over the caller's reference (json_node_init_*() add one). */
static JsonNode *
take_object(JsonObject *obj)
{
  JsonNode *node = json_node_new(JSON_NODE_OBJECT);

  json_node_take_object(node, obj);
  return node;
}

static JsonNode *
take_array(JsonArray *arr)
{
  JsonNode *node = json_node_new(JSON_NODE_ARRAY);

  json_node_take_array(node, arr);
  return node;
}

/* Sends {"return": RET, "id": ID} (RET and ID may be NULL; RET consumed). */
static void
send_return(FakeQmp *fake, JsonNode *ret, JsonNode *id)
{
  g_autoptr(JsonObject) reply = json_object_new();

  json_object_set_member(reply, "return",
                         ret != NULL ? ret : take_object(json_object_new()));
  if (id != NULL)
    json_object_set_member(reply, "id", json_node_copy(id));
  send_object(fake, reply);
}

static void
send_error(FakeQmp *fake, const char *klass, const char *desc, JsonNode *id)
{
  g_autoptr(JsonObject) reply = json_object_new();
  JsonObject *err = json_object_new();

  json_object_set_string_member(err, "class", klass);
  json_object_set_string_member(err, "desc", desc);
  if (id != NULL)
    json_object_set_member(reply, "id", json_node_copy(id));
  json_object_set_object_member(reply, "error", err);
  send_object(fake, reply);
}

static JsonNode *
cpus_return(FakeQmp *fake)
{
  JsonArray *arr = json_array_new();

  for (guint i = 0; i < fake->vcpu_tids->len; i++) {
    JsonObject *cpu = json_object_new();
    JsonObject *props = json_object_new();
    g_autofree char *path =
        g_strdup_printf("/machine/unattached/device[%u]", i);

    json_object_set_int_member(props, "core-id", i);
    json_object_set_int_member(props, "thread-id", 0);
    json_object_set_int_member(props, "socket-id", 0);
    json_object_set_int_member(cpu, "thread-id",
                               g_array_index(fake->vcpu_tids, int, i));
    json_object_set_object_member(cpu, "props", props);
    json_object_set_string_member(cpu, "qom-path", path);
    json_object_set_int_member(cpu, "cpu-index", i);
    json_object_set_string_member(cpu, "target", "x86_64");
    json_array_add_object_element(arr, cpu);
  }
  return take_array(arr);
}

static JsonNode *
iothreads_return(FakeQmp *fake)
{
  JsonArray *arr = json_array_new();

  for (guint i = 0; i < fake->iothread_tids->len; i++) {
    JsonObject *t = json_object_new();

    json_object_set_int_member(t, "poll-shrink", 0);
    json_object_set_int_member(t, "thread-id",
                               g_array_index(fake->iothread_tids, int, i));
    json_object_set_int_member(t, "poll-grow", 0);
    json_object_set_int_member(t, "poll-max-ns", 32768);
    json_object_set_string_member(t, "id", fake->script.iothreads[i]);
    json_array_add_object_element(arr, t);
  }
  return take_array(arr);
}

static JsonNode *
status_return(FakeQmp *fake)
{
  JsonObject *st = json_object_new();

  json_object_set_string_member(st, "status",
                                fake->running    ? "running"
                                : fake->ever_ran ? "paused"
                                                 : "prelaunch");
  json_object_set_boolean_member(st, "singlestep", FALSE);
  json_object_set_boolean_member(st, "running", fake->running);
  return take_object(st);
}

/* Answers one request line. FALSE when the conversation is over. */
static gboolean
handle_line(FakeQmp *fake, const char *line, FakeQmpEnd *end)
{
  const FakeQmpScript *s = &fake->script;
  g_autoptr(JsonParser) parser = json_parser_new_immutable();
  JsonNode *root, *id = NULL, *exec;
  JsonObject *req;
  const char *cmd;
  gboolean targeted;

  if (!json_parser_load_from_data(parser, line, -1, NULL) ||
      (root = json_parser_get_root(parser)) == NULL ||
      !JSON_NODE_HOLDS_OBJECT(root)) {
    send_error(fake, "GenericError", "JSON parse error, invalid input", NULL);
    return TRUE;
  }
  req = json_node_get_object(root);
  id = json_object_get_member(req, "id");
  exec = json_object_get_member(req, "execute");
  if (exec == NULL || !JSON_NODE_HOLDS_VALUE(exec) ||
      json_node_get_value_type(exec) != G_TYPE_STRING) {
    send_error(fake, "GenericError",
               "QMP input must have member 'execute' or 'exec-oob'", id);
    return TRUE;
  }
  cmd = json_node_get_string(exec);

  g_mutex_lock(&fake->lock);
  g_ptr_array_add(fake->commands, g_strdup(cmd));
  g_mutex_unlock(&fake->lock);
  if (s->log_fd > 0) {
    g_autofree char *logline = g_strconcat(cmd, "\n", NULL);
    if (write(s->log_fd, logline, strlen(logline)) < 0) {
      /* a lost log line only weakens a test's evidence */
    }
  }

  targeted = s->command != NULL && g_str_equal(cmd, s->command);
  if (targeted && s->behaviour == FAKE_QMP_NEVER_REPLY)
    return TRUE;
  if (targeted && s->behaviour == FAKE_QMP_EXIT_AT) {
    *end = FAKE_QMP_END_QUIT;
    return FALSE;
  }
  if (targeted && s->behaviour == FAKE_QMP_GARBAGE) {
    send_line(fake, garbage);
    return TRUE;
  }

  if (s->events_before != NULL && g_str_equal(cmd, s->events_before)) {
    for (guint i = 0; s->events != NULL && s->events[i] != NULL; i++)
      send_event(fake, s->events[i], NULL);
  }

  if (targeted && s->behaviour == FAKE_QMP_COMMAND_ERROR) {
    send_error(fake, s->error_class ? s->error_class : "GenericError",
               s->error_desc ? s->error_desc : "injected failure", id);
    return TRUE;
  }

  if (g_str_equal(cmd, "qmp_capabilities")) {
    send_return(fake, NULL, id);
  } else if (g_str_equal(cmd, "query-cpus-fast")) {
    send_return(fake, cpus_return(fake), id);
  } else if (g_str_equal(cmd, "query-iothreads")) {
    send_return(fake, iothreads_return(fake), id);
  } else if (g_str_equal(cmd, "query-status")) {
    send_return(fake, status_return(fake), id);
  } else if (g_str_equal(cmd, "cont")) {
    /* QEMU emits RESUME while running the command, before the reply. */
    if (!fake->running)
      send_event(fake, "RESUME", NULL);
    fake->running = fake->ever_ran = TRUE;
    send_return(fake, NULL, id);
  } else if (g_str_equal(cmd, "stop")) {
    if (fake->running)
      send_event(fake, "STOP", NULL);
    fake->running = FALSE;
    send_return(fake, NULL, id);
  } else if (s->behaviour == FAKE_QMP_MEMDEV_RACE &&
             g_str_equal(cmd, "query-memdev")) {
    send_return(fake,
                json_from_string("[{\"id\": \"hm1\", \"size\": 134217728, "
                                 "\"merge\": true, \"dump\": true, "
                                 "\"prealloc\": false, \"share\": false, "
                                 "\"reserve\": true, \"host-nodes\": [], "
                                 "\"policy\": \"default\"}]",
                                 NULL),
                id);
  } else if (s->behaviour == FAKE_QMP_MEMDEV_RACE &&
             g_str_equal(cmd, "query-memory-devices")) {
    send_return(fake,
                json_from_string(
                    "[{\"type\": \"dimm\", \"data\": {\"id\": \"dimm1\", "
                    "\"memdev\": \"/objects/hm1\", \"node\": 0, \"slot\": 0, "
                    "\"addr\": 4294967296, \"size\": 134217728, "
                    "\"hotplugged\": true, \"hotpluggable\": true}}]",
                    NULL),
                id);
  } else if (s->behaviour == FAKE_QMP_MEMDEV_RACE &&
             g_str_equal(cmd, "qom-get")) {
    if (fake->qom_gets++ == 0)
      send_error(fake, "DeviceNotFound", "Device '/objects/hm1' not found", id);
    else
      send_return(fake, json_from_string("\"memory-backend-ram\"", NULL), id);
  } else if (g_str_equal(cmd, "quit")) {
    g_autoptr(JsonObject) data = json_object_new();

    send_return(fake, NULL, id);
    json_object_set_boolean_member(data, "guest", FALSE);
    json_object_set_string_member(data, "reason", "host-qmp-quit");
    send_event(fake, "SHUTDOWN", data);
    *end = FAKE_QMP_END_QUIT;
    return FALSE;
  } else {
    g_autofree char *desc =
        g_strdup_printf("The command %s has not been found", cmd);
    send_error(fake, "CommandNotFound", desc, id);
  }
  return TRUE;
}

FakeQmpEnd
fake_qmp_serve(FakeQmp *fake, int stop_fd)
{
  const FakeQmpScript *s = &fake->script;
  g_autoptr(GString) in = g_string_new(NULL);
  gboolean answer = TRUE;
  FakeQmpEnd end = FAKE_QMP_END_CLOSED;

  switch (s->behaviour) {
  case FAKE_QMP_NO_GREETING:
    answer = FALSE;
    break;
  case FAKE_QMP_GARBAGE:
    if (s->command == NULL) {
      send_line(fake, garbage);
      answer = FALSE;
    } else {
      send_greeting(fake);
    }
    break;
  case FAKE_QMP_CLOSE_AFTER_GREETING:
    send_greeting(fake);
    shutdown(fake->fd, SHUT_RDWR);
    return FAKE_QMP_END_CLOSED;
  case FAKE_QMP_EXIT_DURING_STARTUP:
    send_greeting(fake);
    return FAKE_QMP_END_EXIT;
  default:
    send_greeting(fake);
    break;
  }

  for (;;) {
    struct pollfd pfd[2] = {
        {.fd = fake->fd, .events = POLLIN},
        {.fd = stop_fd, .events = POLLIN},
    };
    char buf[4096];
    ssize_t n;
    char *nl;

    if (poll(pfd, stop_fd >= 0 ? 2 : 1, -1) < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    if (stop_fd >= 0 && pfd[1].revents != 0)
      break;
    n = read(fake->fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    if (!answer)
      continue;
    g_string_append_len(in, buf, n);
    while ((nl = memchr(in->str, '\n', in->len)) != NULL) {
      g_autofree char *line = g_strndup(in->str, (gsize)(nl - in->str));

      g_string_erase(in, 0, nl - in->str + 1);
      g_strstrip(line);
      if (*line == '\0')
        continue;
      if (!handle_line(fake, line, &end)) {
        shutdown(fake->fd, SHUT_RDWR);
        return end;
      }
    }
  }
  return FAKE_QMP_END_CLOSED;
}

/* ---- in a thread of the test ------------------------------------------ */

static gpointer
serve_thread(gpointer data)
{
  FakeQmp *fake = data;
  FakeQmpEnd end = fake_qmp_serve(fake, fake->stop_pipe[0]);

  /* "QEMU" exits: the client sees the connection close. */
  if (end != FAKE_QMP_END_CLOSED)
    shutdown(fake->fd, SHUT_RDWR);
  return NULL;
}

FakeQmp *
fake_qmp_start(const FakeQmpScript *script, int *client_fd)
{
  int sv[2];
  FakeQmp *fake;

  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
    g_error("fake-qmp: socketpair: %s", g_strerror(errno));
  fake = fake_qmp_new_peer(script, sv[0]);
  if (!g_unix_open_pipe(fake->stop_pipe, FD_CLOEXEC, NULL))
    g_error("fake-qmp: pipe: %s", g_strerror(errno));
  fake->thread = g_thread_new("fake-qmp", serve_thread, fake);
  *client_fd = sv[1];
  return fake;
}

void
fake_qmp_stop(FakeQmp *fake)
{
  if (fake == NULL)
    return;
  close(fake->stop_pipe[1]);
  g_thread_join(fake->thread);
  close(fake->stop_pipe[0]);
  close(fake->fd);
  fake_qmp_free_peer(fake);
}
