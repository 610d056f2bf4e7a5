/* The ledger: one JSON record per VM in a private state directory, an
 * exclusive flock on DIR/lock around "read ledger, plan, write record", and
 * liveness by the QEMU PID and its start time. See docs/ledger.md.
 *
 * Every file operation is relative to the directory fd opened once in
 * qp_ledger_open() (openat/renameat/unlinkat), so nothing can swap a path
 * component under us after the directory was checked. */
#include "topology/ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <dirent.h>
#include <unistd.h>

#include "topology/json-out.h"

#define RECORD_VERSION 1
#define RECORD_SUFFIX ".json"
#define CORRUPT_SUFFIX ".json.corrupt"
#define TEMP_MARK ".json.tmp-"
#define LOCK_NAME "lock"
#define ID_MAX_LEN 128
#define RECORD_MAX_BYTES (1024 * 1024)

struct QpLedger {
  char *dir;
  int dirfd;
  int lockfd;
  gboolean locked;
  pid_t owner; /* the process that opened it: flock is per open file, so a
                  forked child must neither use nor unlock it */
};

/* ---- Small helpers ------------------------------------------------------- */

static gboolean set_errno_error(GError **error, int errsv, const char *fmt, ...)
    G_GNUC_PRINTF(3, 4);

static gboolean
set_errno_error(GError **error, int errsv, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *what = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LEDGER, "%s: %s",
              what, g_strerror(errsv));
  return FALSE;
}

static gboolean
id_is_valid(const char *id)
{
  if (id == NULL || *id == '\0' || *id == '.' || strlen(id) > ID_MAX_LEN)
    return FALSE;
  for (const char *p = id; *p; p++)
    if (!g_ascii_isalnum(*p) && *p != '-' && *p != '_' && *p != '.')
      return FALSE;
  return TRUE;
}

static gboolean
has_suffix_len(const char *name, const char *suffix, gsize *prefix_len)
{
  gsize n = strlen(name), s = strlen(suffix);
  if (n <= s || strcmp(name + n - s, suffix) != 0)
    return FALSE;
  *prefix_len = n - s;
  return TRUE;
}

static gboolean
fsync_dir(QpLedger *ledger, GError **error)
{
  if (fsync(ledger->dirfd) < 0 && errno != EINVAL)
    return set_errno_error(error, errno, "cannot sync state directory %s",
                           ledger->dir);
  return TRUE;
}

static gboolean
write_all(int fd, const char *buf, gsize len)
{
  while (len > 0) {
    ssize_t n = write(fd, buf, len);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return FALSE;
    }
    buf += n;
    len -= (gsize)n;
  }
  return TRUE;
}

/* Reads NAME (a regular file, not followed if a symlink) relative to DIRFD.
 * At most RECORD_MAX_BYTES + 1 bytes are read. */
static gboolean
read_at(int dirfd, const char *name, char **out, gsize *out_len, int *errsv)
{
  int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    *errsv = errno;
    return FALSE;
  }
  struct stat st;
  if (fstat(fd, &st) < 0) {
    *errsv = errno;
    close(fd);
    return FALSE;
  }
  if (!S_ISREG(st.st_mode)) {
    *errsv = EINVAL;
    close(fd);
    return FALSE;
  }
  GString *s = g_string_sized_new(st.st_size > 0 ? (gsize)st.st_size + 1 : 256);
  char buf[8192];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      *errsv = errno;
      close(fd);
      g_string_free(s, TRUE);
      return FALSE;
    }
    if (n == 0)
      break;
    g_string_append_len(s, buf, n);
    if (s->len > RECORD_MAX_BYTES)
      break;
  }
  close(fd);
  *out_len = s->len;
  *out = g_string_free(s, FALSE);
  return TRUE;
}

/* ---- Process start times ----------------------------------------------- */

guint64
qp_proc_start_time(int pid)
{
  if (pid <= 0)
    return 0;
  g_autofree char *path = g_strdup_printf("/proc/%d/stat", pid);
  g_autofree char *text = NULL;
  if (!g_file_get_contents(path, &text, NULL, NULL))
    return 0;
  /* comm (field 2) may hold spaces and parentheses: fields resume after the
   * last ')'. */
  const char *p = strrchr(text, ')');
  if (p == NULL)
    return 0;
  p++;
  /* Field 3 is the state: a zombie has released its memory and CPUs. */
  while (*p == ' ')
    p++;
  if (*p == 'Z' || *p == 'X' || *p == 'x')
    return 0;
  for (int field = 3; field < 22; field++) {
    p = strchr(p, ' ');
    if (p == NULL)
      return 0;
    while (*p == ' ')
      p++;
  }
  char *end = NULL;
  errno = 0;
  guint64 v = g_ascii_strtoull(p, &end, 10);
  if (errno != 0 || end == p)
    return 0;
  return v;
}

static gboolean
pid_start_matches(int pid, guint64 start)
{
  return pid > 0 && start != 0 && qp_proc_start_time(pid) == start;
}

static gboolean
claim_is_live(const QpClaim *c)
{
  return pid_start_matches(c->qemu_pid, c->qemu_start) ||
         pid_start_matches(c->launcher_pid, c->launcher_start);
}

/* ---- Directory ------------------------------------------------------------
 */

char *
qp_ledger_default_dir(void)
{
  if (geteuid() == 0)
    return g_strdup("/run/qemu-pin");
  const char *xdg = g_getenv("XDG_RUNTIME_DIR");
  if (xdg != NULL && *xdg != '\0')
    return g_build_filename(xdg, "qemu-pin", NULL);
  return g_strdup_printf("/tmp/qemu-pin-%u", (unsigned)geteuid());
}

static gboolean
check_dir_stat(const char *dir, const struct stat *st, GError **error)
{
  uid_t me = geteuid();
  if (S_ISLNK(st->st_mode)) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LEDGER,
                "state directory %s is a symlink; expected a real directory "
                "owned by uid %u with mode 0700",
                dir, (unsigned)me);
    return FALSE;
  }
  if (!S_ISDIR(st->st_mode)) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LEDGER,
                "state directory %s is not a directory; expected a directory "
                "owned by uid %u with mode 0700",
                dir, (unsigned)me);
    return FALSE;
  }
  if (st->st_uid != me) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LEDGER,
                "state directory %s is owned by uid %u; expected uid %u "
                "(remove it or choose another --state-dir)",
                dir, (unsigned)st->st_uid, (unsigned)me);
    return FALSE;
  }
  if (st->st_mode & (S_IWGRP | S_IWOTH)) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LEDGER,
                "state directory %s has mode %04o, writable by group or "
                "others; expected 0700",
                dir, (unsigned)(st->st_mode & 07777));
    return FALSE;
  }
  return TRUE;
}

QpLedger *
qp_ledger_open(const char *dir, GError **error)
{
  g_return_val_if_fail(dir != NULL, NULL);
  gboolean created = FALSE;
  if (mkdir(dir, 0700) == 0)
    created = TRUE;
  else if (errno != EEXIST) {
    set_errno_error(error, errno, "cannot create state directory %s%s", dir,
                    errno == ENOENT ? " (its parent must exist)" : "");
    return NULL;
  }

  struct stat st;
  if (lstat(dir, &st) < 0) {
    set_errno_error(error, errno, "cannot inspect state directory %s", dir);
    return NULL;
  }
  if (!check_dir_stat(dir, &st, error))
    return NULL;

  int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dirfd < 0) {
    if (errno == ELOOP || errno == ENOTDIR) {
      /* Swapped between lstat and open: report it as what it is now. */
      if (lstat(dir, &st) == 0 && !check_dir_stat(dir, &st, error))
        return NULL;
    }
    set_errno_error(error, errno, "cannot open state directory %s", dir);
    return NULL;
  }
  /* The fd is what we use from now on: check that, not the path. */
  if (fstat(dirfd, &st) < 0) {
    set_errno_error(error, errno, "cannot inspect state directory %s", dir);
    close(dirfd);
    return NULL;
  }
  if (!check_dir_stat(dir, &st, error)) {
    close(dirfd);
    return NULL;
  }
  if (created && (st.st_mode & 07777) != 0700)
    (void)fchmod(dirfd, 0700);

  int lockfd =
      openat(dirfd, LOCK_NAME,
             O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
  if (lockfd < 0) {
    set_errno_error(error, errno, "cannot open lock file %s/%s", dir,
                    LOCK_NAME);
    close(dirfd);
    return NULL;
  }
  if (fstat(lockfd, &st) < 0 || !S_ISREG(st.st_mode) ||
      st.st_uid != geteuid()) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LEDGER,
                "lock file %s/%s is not a regular file owned by uid %u", dir,
                LOCK_NAME, (unsigned)geteuid());
    close(lockfd);
    close(dirfd);
    return NULL;
  }

  QpLedger *ledger = g_new0(QpLedger, 1);
  ledger->dir = g_strdup(dir);
  ledger->dirfd = dirfd;
  ledger->lockfd = lockfd;
  ledger->owner = getpid();
  return ledger;
}

void
qp_ledger_close(QpLedger *ledger)
{
  if (ledger == NULL)
    return;
  /* In a forked child, closing our copies leaves the parent's lock alone;
   * LOCK_UN would release it for both. */
  if (ledger->locked && ledger->owner == getpid())
    qp_ledger_unlock(ledger);
  close(ledger->lockfd);
  close(ledger->dirfd);
  g_free(ledger->dir);
  g_free(ledger);
}

const char *
qp_ledger_dir(const QpLedger *ledger)
{
  return ledger->dir;
}

static gboolean
require_owner(QpLedger *ledger, GError **error)
{
  if (ledger->owner == getpid())
    return TRUE;
  g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LEDGER,
              "ledger %s was opened by process %d and used by process %d "
              "after fork; open it again in this process",
              ledger->dir, (int)ledger->owner, (int)getpid());
  return FALSE;
}

gboolean
qp_ledger_lock(QpLedger *ledger, GError **error)
{
  if (!require_owner(ledger, error))
    return FALSE;
  while (flock(ledger->lockfd, LOCK_EX) < 0) {
    if (errno == EINTR)
      continue;
    return set_errno_error(error, errno, "cannot lock %s/%s", ledger->dir,
                           LOCK_NAME);
  }
  ledger->locked = TRUE;
  return TRUE;
}

void
qp_ledger_unlock(QpLedger *ledger)
{
  if (ledger->owner != getpid())
    return; /* the parent's lock, not ours to release */
  while (flock(ledger->lockfd, LOCK_UN) < 0 && errno == EINTR)
    ;
  ledger->locked = FALSE;
}

gboolean
qp_ledger_is_locked(const QpLedger *ledger)
{
  return ledger->locked && ledger->owner == getpid();
}

static gboolean
require_lock(QpLedger *ledger, const char *what, GError **error)
{
  if (!require_owner(ledger, error))
    return FALSE;
  if (ledger->locked)
    return TRUE;
  g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_LEDGER,
              "%s of ledger %s without holding its lock; take "
              "qp_ledger_lock() first",
              what, ledger->dir);
  return FALSE;
}

char *
qp_ledger_new_id(void)
{
  return g_uuid_string_random();
}

/* ---- Records: JSON ---------------------------------------------------------
 */

char *
qp_claim_to_json(const QpClaim *c)
{
  g_autoptr(JsonBuilder) b = json_builder_new();
  json_builder_begin_object(b);
  qp_json_add_int(b, "version", RECORD_VERSION);
  json_builder_set_member_name(b, "id");
  json_builder_add_string_value(b, c->id ? c->id : "");
  json_builder_set_member_name(b, "name");
  if (c->name)
    json_builder_add_string_value(b, c->name);
  else
    json_builder_add_null_value(b);
  qp_json_add_int(b, "qemu-pid", c->qemu_pid);
  qp_json_add_int(b, "qemu-start", (gint64)c->qemu_start);
  qp_json_add_int(b, "launcher-pid", c->launcher_pid);
  qp_json_add_int(b, "launcher-start", (gint64)c->launcher_start);
  qp_json_add_int(b, "keeper-pid", c->keeper_pid);
  json_builder_set_member_name(b, "mode");
  json_builder_add_string_value(b, qp_mode_name(c->mode));
  json_builder_set_member_name(b, "best-effort");
  json_builder_add_boolean_value(b, c->best_effort);
  /* Order matters for salvage of a damaged record (docs/ledger.md): every
   * field that names nodes comes before "time". */
  qp_json_add_holdings(b, c->mem, c->huge, c->dedicated, c->load, c->cpu_load);
  qp_json_add_int(b, "time", c->time);
  json_builder_end_object(b);

  g_autoptr(JsonGenerator) gen = json_generator_new();
  g_autoptr(JsonNode) root = json_builder_get_root(b);
  json_generator_set_root(gen, root);
  json_generator_set_pretty(gen, TRUE);
  json_generator_set_indent(gen, 2);
  char *text = json_generator_to_data(gen, NULL);
  char *out = g_strconcat(text, "\n", NULL);
  g_free(text);
  return out;
}

static gboolean bad_field(GError **error, const char *field, const char *fmt,
                          ...) G_GNUC_PRINTF(3, 4);

static gboolean
bad_field(GError **error, const char *field, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *what = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID,
              "ledger record field \"%s\" %s", field, what);
  return FALSE;
}

static const char *
node_type_word(JsonNode *n)
{
  if (JSON_NODE_HOLDS_NULL(n))
    return "null";
  if (JSON_NODE_HOLDS_OBJECT(n))
    return "an object";
  if (JSON_NODE_HOLDS_ARRAY(n))
    return "an array";
  GType t = json_node_get_value_type(n);
  if (t == G_TYPE_STRING)
    return "a string";
  if (t == G_TYPE_BOOLEAN)
    return "a boolean";
  if (t == G_TYPE_DOUBLE)
    return "a fractional or too large number";
  return "an integer";
}

/* A non-negative integer <= MAX in node N, FIELD names it in errors. */
static gboolean
get_uint(JsonNode *n, const char *field, guint64 max, guint64 *out,
         GError **error)
{
  if (n == NULL)
    return bad_field(error, field,
                     "is missing; expected a non-negative "
                     "integer");
  if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_INT64)
    return bad_field(error, field, "is %s; expected a non-negative integer",
                     node_type_word(n));
  gint64 v = json_node_get_int(n);
  if (v < 0)
    return bad_field(error, field,
                     "is %" G_GINT64_FORMAT "; expected a non-negative "
                     "integer",
                     v);
  if ((guint64)v > max)
    return bad_field(
        error, field,
        "is %" G_GINT64_FORMAT "; expected at most %" G_GUINT64_FORMAT, v, max);
  *out = (guint64)v;
  return TRUE;
}

static gboolean
get_member_uint(JsonObject *o, const char *field, guint64 max, guint64 *out,
                GError **error)
{
  return get_uint(json_object_get_member(o, field), field, max, out, error);
}

static gboolean
get_member_pid(JsonObject *o, const char *field, int *out, GError **error)
{
  guint64 v;
  if (!get_member_uint(o, field, INT_MAX, &v, error))
    return FALSE;
  *out = (int)v;
  return TRUE;
}

static gboolean
parse_node_key(const char *key, const char *field, int *out, GError **error)
{
  guint64 v = 0;
  const char *p = key;
  if (*p == '\0')
    return bad_field(error, field, "has an empty key; expected node numbers");
  for (; *p; p++) {
    if (!g_ascii_isdigit(*p) || (p == key + 1 && key[0] == '0'))
      return bad_field(error, field, "has key \"%s\"; expected a node number",
                       key);
    v = v * 10 + (guint64)(*p - '0');
    if (v > QP_LIST_MAX_INDEX)
      return bad_field(error, field, "has node %s; expected at most %d", key,
                       QP_LIST_MAX_INDEX);
  }
  *out = (int)v;
  return TRUE;
}

/* { "node": value } with non-negative integer values. */
static gboolean
get_node_map(JsonObject *o, const char *field, gboolean load, GArray *out,
             GError **error)
{
  JsonNode *n = json_object_get_member(o, field);
  if (n == NULL)
    return bad_field(error, field,
                     "is missing; expected an object of node "
                     "numbers");
  if (!JSON_NODE_HOLDS_OBJECT(n))
    return bad_field(error, field,
                     "is %s; expected an object of node "
                     "numbers",
                     node_type_word(n));
  JsonObject *m = json_node_get_object(n);
  g_autoptr(GList) members = json_object_get_members(m);
  for (GList *l = members; l; l = l->next) {
    const char *key = l->data;
    int node = 0;
    if (!parse_node_key(key, field, &node, error))
      return FALSE;
    g_autofree char *sub = g_strdup_printf("%s\" node \"%s", field, key);
    guint64 v;
    if (!get_uint(json_object_get_member(m, key), sub,
                  load ? G_MAXUINT : (guint64)G_MAXINT64, &v, error))
      return FALSE;
    if (load) {
      QpNodeLoad nl = {.node = node, .vcpus = (guint)v};
      g_array_append_val(out, nl);
    } else {
      QpNodeAmount a = {.node = node, .mib = v};
      g_array_append_val(out, a);
    }
  }
  return TRUE;
}

/* "cpu-load": [ { "cpus": "0-3", "vcpus": 8 } ]; optional (records written
 * before it have only the per-node "load"). */
static gboolean
get_cpu_load(JsonObject *o, GArray *out, GError **error)
{
  JsonNode *n = json_object_get_member(o, "cpu-load");
  if (n == NULL)
    return TRUE;
  if (!JSON_NODE_HOLDS_ARRAY(n))
    return bad_field(error, "cpu-load", "is %s; expected an array",
                     node_type_word(n));
  JsonArray *arr = json_node_get_array(n);
  for (guint i = 0; i < json_array_get_length(arr); i++) {
    JsonNode *e = json_array_get_element(arr, i);
    g_autofree char *field = g_strdup_printf("cpu-load[%u]", i);
    if (!JSON_NODE_HOLDS_OBJECT(e))
      return bad_field(error, field, "is %s; expected an object",
                       node_type_word(e));
    JsonObject *eo = json_node_get_object(e);
    g_autofree char *f_cpus = g_strdup_printf("%s.cpus", field);
    g_autofree char *f_vcpus = g_strdup_printf("%s.vcpus", field);
    JsonNode *cn = json_object_get_member(eo, "cpus");
    if (cn == NULL || !JSON_NODE_HOLDS_VALUE(cn) ||
        json_node_get_value_type(cn) != G_TYPE_STRING)
      return bad_field(error, f_cpus, "is %s; expected a CPU list string",
                       cn ? node_type_word(cn) : "missing");
    g_autofree char *origin =
        g_strdup_printf("ledger record field \"%s\"", f_cpus);
    hwloc_bitmap_t set = NULL;
    if (!qp_list_parse(json_node_get_string(cn), origin, QP_LIST_MAX_INDEX,
                       &set, error))
      return FALSE;
    guint64 v;
    if (!get_uint(json_object_get_member(eo, "vcpus"), f_vcpus, G_MAXUINT, &v,
                  error)) {
      hwloc_bitmap_free(set);
      return FALSE;
    }
    QpCpuLoad l = {set, (guint)v};
    g_array_append_val(out, l);
  }
  return TRUE;
}

QpClaim *
qp_claim_from_json(const char *text, gsize len, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new();
  g_autoptr(GError) local = NULL;
  if (!json_parser_load_from_data(parser, text, (gssize)len, &local)) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID,
                "ledger record is not valid JSON: %s", local->message);
    return NULL;
  }
  JsonNode *root = json_parser_get_root(parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT(root)) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID,
                "ledger record is %s; expected a JSON object",
                root ? node_type_word(root) : "empty");
    return NULL;
  }
  JsonObject *o = json_node_get_object(root);
  g_autoptr(QpClaim) c = qp_claim_new();
  guint64 v;

  if (!get_member_uint(o, "version", G_MAXINT, &v, error))
    return NULL;
  if (v != RECORD_VERSION) {
    bad_field(error, "version",
              "is %" G_GUINT64_FORMAT "; expected %d (written by another "
              "qemu-pin version?)",
              v, RECORD_VERSION);
    return NULL;
  }

  JsonNode *n = json_object_get_member(o, "id");
  if (n == NULL || !JSON_NODE_HOLDS_VALUE(n) ||
      json_node_get_value_type(n) != G_TYPE_STRING) {
    bad_field(error, "id", "is %s; expected a string",
              n ? node_type_word(n) : "missing");
    return NULL;
  }
  if (!id_is_valid(json_node_get_string(n))) {
    bad_field(error, "id",
              "is \"%s\"; expected letters, digits, '-', '_' or '.' "
              "(not leading)",
              json_node_get_string(n));
    return NULL;
  }
  c->id = g_strdup(json_node_get_string(n));

  n = json_object_get_member(o, "name");
  if (n != NULL && !JSON_NODE_HOLDS_NULL(n)) {
    if (!JSON_NODE_HOLDS_VALUE(n) ||
        json_node_get_value_type(n) != G_TYPE_STRING) {
      bad_field(error, "name", "is %s; expected a string or null",
                node_type_word(n));
      return NULL;
    }
    c->name = g_strdup(json_node_get_string(n));
  }

  if (!get_member_pid(o, "qemu-pid", &c->qemu_pid, error) ||
      !get_member_uint(o, "qemu-start", G_MAXINT64, &c->qemu_start, error) ||
      !get_member_pid(o, "launcher-pid", &c->launcher_pid, error) ||
      !get_member_uint(o, "launcher-start", G_MAXINT64, &c->launcher_start,
                       error) ||
      !get_member_pid(o, "keeper-pid", &c->keeper_pid, error))
    return NULL;

  n = json_object_get_member(o, "mode");
  if (n == NULL || !JSON_NODE_HOLDS_VALUE(n) ||
      json_node_get_value_type(n) != G_TYPE_STRING) {
    bad_field(error, "mode", "is %s; expected a mode name",
              n ? node_type_word(n) : "missing");
    return NULL;
  }
  if (!qp_mode_parse(json_node_get_string(n), &c->mode)) {
    bad_field(error, "mode",
              "is \"%s\"; expected none, balanced, numa or one-to-one",
              json_node_get_string(n));
    return NULL;
  }

  n = json_object_get_member(o, "best-effort");
  if (n != NULL) {
    if (!JSON_NODE_HOLDS_VALUE(n) ||
        json_node_get_value_type(n) != G_TYPE_BOOLEAN) {
      bad_field(error, "best-effort", "is %s; expected true or false",
                node_type_word(n));
      return NULL;
    }
    c->best_effort = json_node_get_boolean(n);
  }

  if (!get_node_map(o, "memory-mib", FALSE, c->mem, error))
    return NULL;

  n = json_object_get_member(o, "hugepages");
  if (n == NULL || !JSON_NODE_HOLDS_ARRAY(n)) {
    bad_field(error, "hugepages", "is %s; expected an array",
              n ? node_type_word(n) : "missing");
    return NULL;
  }
  JsonArray *arr = json_node_get_array(n);
  for (guint i = 0; i < json_array_get_length(arr); i++) {
    JsonNode *e = json_array_get_element(arr, i);
    g_autofree char *field = g_strdup_printf("hugepages[%u]", i);
    if (!JSON_NODE_HOLDS_OBJECT(e)) {
      bad_field(error, field, "is %s; expected an object", node_type_word(e));
      return NULL;
    }
    JsonObject *eo = json_node_get_object(e);
    g_autofree char *f_node = g_strdup_printf("%s.node", field);
    g_autofree char *f_kib = g_strdup_printf("%s.page-kib", field);
    g_autofree char *f_pages = g_strdup_printf("%s.pages", field);
    guint64 node, kib, pages;
    if (!get_uint(json_object_get_member(eo, "node"), f_node, QP_LIST_MAX_INDEX,
                  &node, error) ||
        !get_uint(json_object_get_member(eo, "page-kib"), f_kib, G_MAXINT64,
                  &kib, error) ||
        !get_uint(json_object_get_member(eo, "pages"), f_pages, G_MAXINT64,
                  &pages, error))
      return NULL;
    if (kib == 0) {
      bad_field(error, f_kib, "is 0; expected a page size in KiB");
      return NULL;
    }
    QpHugeClaim h = {.node = (int)node, .page_kib = kib, .pages = pages};
    g_array_append_val(c->huge, h);
  }

  n = json_object_get_member(o, "dedicated-cpus");
  if (n == NULL || !JSON_NODE_HOLDS_VALUE(n) ||
      json_node_get_value_type(n) != G_TYPE_STRING) {
    bad_field(error, "dedicated-cpus", "is %s; expected a CPU list string",
              n ? node_type_word(n) : "missing");
    return NULL;
  }
  const char *cpus = json_node_get_string(n);
  if (*cpus != '\0') {
    g_auto(hwloc_bitmap_t) set = NULL;
    if (!qp_list_parse(cpus, "ledger record field \"dedicated-cpus\"",
                       QP_LIST_MAX_INDEX, &set, error))
      return NULL;
    hwloc_bitmap_copy(c->dedicated, set);
  }

  if (!get_node_map(o, "load", TRUE, c->load, error))
    return NULL;
  if (!get_cpu_load(o, c->cpu_load, error))
    return NULL;

  if (!get_member_uint(o, "time", G_MAXINT64, &v, error))
    return NULL;
  c->time = (gint64)v;

  return g_steal_pointer(&c);
}

/* ---- Records: files ---------------------------------------------------- */

gboolean
qp_ledger_write(QpLedger *ledger, const QpClaim *claim, GError **error)
{
  if (!require_lock(ledger, "writing a record", error))
    return FALSE;
  if (!id_is_valid(claim->id)) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID,
                "ledger record id \"%s\" is not usable as a file name; "
                "expected letters, digits, '-', '_' or '.' (not leading)",
                claim->id ? claim->id : "");
    return FALSE;
  }
  g_autofree char *text = qp_claim_to_json(claim);
  g_autofree char *name = g_strconcat(claim->id, RECORD_SUFFIX, NULL);
  g_autofree char *tmp =
      g_strdup_printf(".%s" TEMP_MARK "%d", claim->id, (int)getpid());

  int fd = -1;
  for (int attempt = 0; attempt < 2 && fd < 0; attempt++) {
    fd = openat(ledger->dirfd, tmp,
                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY,
                0600);
    if (fd < 0 && errno == EEXIST && attempt == 0)
      (void)unlinkat(ledger->dirfd, tmp, 0); /* ours, left by a failure */
    else if (fd < 0)
      break;
  }
  if (fd < 0)
    return set_errno_error(error, errno, "cannot create %s/%s", ledger->dir,
                           tmp);
  if (!write_all(fd, text, strlen(text)) || fsync(fd) < 0) {
    int errsv = errno;
    close(fd);
    unlinkat(ledger->dirfd, tmp, 0);
    return set_errno_error(error, errsv, "cannot write %s/%s", ledger->dir,
                           tmp);
  }
  if (close(fd) < 0) {
    int errsv = errno;
    unlinkat(ledger->dirfd, tmp, 0);
    return set_errno_error(error, errsv, "cannot write %s/%s", ledger->dir,
                           tmp);
  }
  if (renameat(ledger->dirfd, tmp, ledger->dirfd, name) < 0) {
    int errsv = errno;
    unlinkat(ledger->dirfd, tmp, 0);
    return set_errno_error(error, errsv, "cannot rename %s/%s to %s",
                           ledger->dir, tmp, name);
  }
  return fsync_dir(ledger, error);
}

gboolean
qp_ledger_remove(QpLedger *ledger, const char *id, GError **error)
{
  if (!id_is_valid(id)) {
    g_set_error(error, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID,
                "ledger record id \"%s\" is not a valid id", id ? id : "");
    return FALSE;
  }
  if (!require_owner(ledger, error))
    return FALSE;
  gboolean took = FALSE;
  if (!ledger->locked) {
    if (!qp_ledger_lock(ledger, error))
      return FALSE;
    took = TRUE;
  }
  g_autofree char *name = g_strconcat(id, RECORD_SUFFIX, NULL);
  gboolean ok = TRUE;
  if (unlinkat(ledger->dirfd, name, 0) < 0) {
    if (errno != ENOENT)
      ok = set_errno_error(error, errno, "cannot remove %s/%s", ledger->dir,
                           name);
  } else {
    ok = fsync_dir(ledger, error);
  }
  if (took)
    qp_ledger_unlock(ledger);
  return ok;
}

gboolean
qp_ledger_rewrite(const char *dir, QpClaim *claim, QpClaimEditFunc edit,
                  gpointer data, GError **error)
{
  g_autoptr(QpLedger) ledger = qp_ledger_open(dir, error);
  if (ledger == NULL || !qp_ledger_lock(ledger, error))
    return FALSE;
  g_autoptr(QpClaims) claims = qp_ledger_read(ledger, NULL, error);
  gboolean ok = claims != NULL &&
                (edit == NULL || edit(claim, claims, data, error)) &&
                qp_ledger_write(ledger, claim, error);
  qp_ledger_unlock(ledger);
  return ok;
}

/* ---- Reading the ledger -------------------------------------------------- */

static int
cmp_str(gconstpointer a, gconstpointer b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static GPtrArray *
list_dir(QpLedger *ledger, GError **error)
{
  int fd = openat(ledger->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    set_errno_error(error, errno, "cannot list %s", ledger->dir);
    return NULL;
  }
  DIR *d = fdopendir(fd);
  if (d == NULL) {
    set_errno_error(error, errno, "cannot list %s", ledger->dir);
    close(fd);
    return NULL;
  }
  GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
  struct dirent *de;
  errno = 0;
  while ((de = readdir(d)) != NULL) {
    if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
      g_ptr_array_add(names, g_strdup(de->d_name));
    errno = 0;
  }
  int errsv = errno;
  closedir(d);
  if (errsv != 0) {
    set_errno_error(error, errsv, "cannot list %s", ledger->dir);
    g_ptr_array_unref(names);
    return NULL;
  }
  g_ptr_array_sort(names, cmp_str);
  return names;
}

/* ".<id>.json.tmp-<pid>": the pid of the writer, or 0 if NAME is not a
 * temp file. */
static int
temp_file_pid(const char *name)
{
  if (name[0] != '.')
    return 0;
  const char *mark = g_strrstr(name, TEMP_MARK);
  if (mark == NULL)
    return 0;
  const char *p = mark + strlen(TEMP_MARK);
  char *end = NULL;
  guint64 pid = g_ascii_strtoull(p, &end, 10);
  if (end == p || *end != '\0' || pid == 0 || pid > INT_MAX)
    return 0;
  return (int)pid;
}

static gboolean
pid_exists(int pid)
{
  return kill(pid, 0) == 0 || errno == EPERM;
}

static void
add_node_keys(GRegex *keys, const char *body, hwloc_bitmap_t nodes)
{
  g_autoptr(GMatchInfo) mi = NULL;
  g_regex_match(keys, body, 0, &mi);
  while (g_match_info_matches(mi)) {
    g_autofree char *num = g_match_info_fetch(mi, 1);
    guint64 v = g_ascii_strtoull(num, NULL, 10);
    if (v <= QP_LIST_MAX_INDEX)
      hwloc_bitmap_set(nodes, (unsigned)v);
    g_match_info_next(mi, NULL);
  }
}

/* Finds the text of section FIELD (a JSON object or array without nesting
 * of the same bracket) in TEXT. NULL when the section is missing or not
 * closed. */
static char *
section(const char *text, const char *field, char open, char close)
{
  g_autofree char *pat = g_strdup_printf(
      "\"%s\"\\s*:\\s*\\%c([^\\%c\\%c]*)\\%c", field, open, open, close, close);
  g_autoptr(GRegex) re = g_regex_new(pat, G_REGEX_RAW, 0, NULL);
  g_autoptr(GMatchInfo) mi = NULL;
  if (re == NULL || !g_regex_match(re, text, 0, &mi))
    return NULL;
  return g_match_info_fetch(mi, 1);
}

/* Node numbers a damaged record names. Only when every section that names
 * nodes or CPUs is still complete (memory-mib, hugepages, dedicated-cpus,
 * load); otherwise NULL: the record may have held any node. */
static hwloc_bitmap_t
salvage_nodes(const char *text, const QpHost *host)
{
  g_autofree char *mem = section(text, "memory-mib", '{', '}');
  g_autofree char *huge = section(text, "hugepages", '[', ']');
  g_autofree char *load = section(text, "load", '{', '}');
  if (mem == NULL || huge == NULL || load == NULL)
    return NULL;
  g_autoptr(GRegex) cpus_re = g_regex_new(
      "\"dedicated-cpus\"\\s*:\\s*\"([0-9,-]*)\"", G_REGEX_RAW, 0, NULL);
  g_autoptr(GMatchInfo) cmi = NULL;
  if (!g_regex_match(cpus_re, text, 0, &cmi))
    return NULL;
  g_autofree char *cpus = g_match_info_fetch(cmi, 1);

  g_auto(hwloc_bitmap_t) nodes = hwloc_bitmap_alloc();
  g_autoptr(GRegex) keys =
      g_regex_new("\"([0-9]{1,5})\"\\s*:", G_REGEX_RAW, 0, NULL);
  g_autoptr(GRegex) hnodes =
      g_regex_new("\"node\"\\s*:\\s*([0-9]{1,5})", G_REGEX_RAW, 0, NULL);
  add_node_keys(keys, mem, nodes);
  add_node_keys(keys, load, nodes);
  add_node_keys(hnodes, huge, nodes);
  if (*cpus != '\0') {
    g_auto(hwloc_bitmap_t) set = NULL;
    if (!qp_list_parse(cpus, "dedicated-cpus", QP_LIST_MAX_INDEX, &set, NULL))
      return NULL;
    if (host == NULL)
      return NULL; /* cannot map CPUs to nodes */
    for (int cpu = hwloc_bitmap_first(set); cpu >= 0;
         cpu = hwloc_bitmap_next(set, cpu)) {
      gboolean found = FALSE;
      for (guint i = 0; i < host->n_cpus; i++)
        if (host->cpus[i].id == cpu && host->cpus[i].node >= 0) {
          hwloc_bitmap_set(nodes, (unsigned)host->cpus[i].node);
          found = TRUE;
        }
      if (!found)
        return NULL; /* a CPU this host does not know */
    }
  }
  if (hwloc_bitmap_iszero(nodes))
    return NULL;
  return g_steal_pointer(&nodes);
}

static void
all_nodes(const QpHost *host, hwloc_bitmap_t out)
{
  if (host == NULL) {
    hwloc_bitmap_set_range(out, 0, QP_LIST_MAX_INDEX);
    return;
  }
  for (guint i = 0; i < host->n_nodes; i++)
    hwloc_bitmap_set(out, (unsigned)host->nodes[i].id);
}

static void
block_corrupt(QpLedger *ledger, const char *name, const QpHost *host,
              QpClaims *claims)
{
  g_autofree char *text = NULL;
  gsize len = 0;
  int errsv = 0;
  g_auto(hwloc_bitmap_t) nodes = NULL;
  if (read_at(ledger->dirfd, name, &text, &len, &errsv) &&
      memchr(text, '\0', len) == NULL)
    nodes = salvage_nodes(text, host);
  g_autofree char *path = g_build_filename(ledger->dir, name, NULL);
  if (nodes != NULL) {
    g_autofree char *list = qp_list_format(nodes);
    hwloc_bitmap_or(claims->blocked_nodes, claims->blocked_nodes, nodes);
    g_ptr_array_add(claims->warnings,
                    g_strdup_printf("ledger record %s is unreadable: its "
                                    "nodes %s are held until an operator "
                                    "removes it",
                                    path, list));
  } else {
    g_auto(hwloc_bitmap_t) all = hwloc_bitmap_alloc();
    all_nodes(host, all);
    hwloc_bitmap_or(claims->blocked_nodes, claims->blocked_nodes, all);
    g_autofree char *list = qp_list_format(all);
    g_ptr_array_add(claims->warnings,
                    g_strdup_printf("ledger record %s is unreadable and does "
                                    "not say which nodes it holds: all nodes "
                                    "%s are held until an operator removes it",
                                    path, list));
  }
}

QpClaims *
qp_ledger_read(QpLedger *ledger, const QpHost *host, GError **error)
{
  if (!require_lock(ledger, "reading", error))
    return NULL;
  g_autoptr(GPtrArray) names = list_dir(ledger, error);
  if (names == NULL)
    return NULL;
  g_autoptr(QpClaims) claims = qp_claims_new();
  gboolean changed = FALSE;
  g_autoptr(GPtrArray) corrupt = g_ptr_array_new_with_free_func(g_free);

  for (guint i = 0; i < names->len; i++) {
    const char *name = names->pdata[i];
    gsize plen;
    int tpid = temp_file_pid(name);
    if (tpid != 0) {
      if (!pid_exists(tpid) && unlinkat(ledger->dirfd, name, 0) == 0)
        changed = TRUE;
      continue;
    }
    if (name[0] == '.')
      continue;
    if (has_suffix_len(name, CORRUPT_SUFFIX, &plen)) {
      g_ptr_array_add(corrupt, g_strdup(name));
      continue;
    }
    if (!has_suffix_len(name, RECORD_SUFFIX, &plen))
      continue;
    g_autofree char *id = g_strndup(name, plen);

    g_autofree char *text = NULL;
    gsize len = 0;
    int errsv = 0;
    g_autoptr(GError) perr = NULL;
    g_autoptr(QpClaim) c = NULL;
    if (!read_at(ledger->dirfd, name, &text, &len, &errsv)) {
      if (errsv == ENOENT)
        continue;
      if (errsv != EINVAL && errsv != ELOOP) {
        set_errno_error(error, errsv, "cannot read ledger record %s/%s",
                        ledger->dir, name);
        return NULL;
      }
      g_set_error(&perr, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID,
                  "not a regular file");
    } else if (len > RECORD_MAX_BYTES) {
      g_set_error(&perr, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID,
                  "larger than %d bytes", RECORD_MAX_BYTES);
    } else if (memchr(text, '\0', len) != NULL) {
      g_set_error(&perr, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID,
                  "contains NUL bytes");
    } else {
      c = qp_claim_from_json(text, len, &perr);
      if (c != NULL && strcmp(c->id, id) != 0) {
        g_clear_error(&perr);
        g_set_error(&perr, QP_TOPOLOGY_ERROR, QP_TOPOLOGY_ERROR_INVALID,
                    "its id \"%s\" differs from its file name", c->id);
        g_clear_pointer(&c, qp_claim_free);
      }
    }

    if (c == NULL) {
      g_autofree char *dest = g_strconcat(id, CORRUPT_SUFFIX, NULL);
      if (renameat(ledger->dirfd, name, ledger->dirfd, dest) < 0) {
        set_errno_error(error, errno,
                        "cannot move unreadable ledger record %s/%s aside",
                        ledger->dir, name);
        return NULL;
      }
      changed = TRUE;
      g_ptr_array_add(claims->warnings,
                      g_strdup_printf("ledger record %s/%s could not be read "
                                      "(%s); moved to %s",
                                      ledger->dir, name, perr->message, dest));
      g_ptr_array_add(corrupt, g_steal_pointer(&dest));
      continue;
    }

    if (!claim_is_live(c)) {
      if (unlinkat(ledger->dirfd, name, 0) < 0 && errno != ENOENT) {
        set_errno_error(error, errno, "cannot prune stale ledger record %s/%s",
                        ledger->dir, name);
        return NULL;
      }
      changed = TRUE;
      continue;
    }
    g_ptr_array_add(claims->claims, g_steal_pointer(&c));
  }

  g_ptr_array_sort(corrupt, cmp_str);
  for (guint i = 0; i < corrupt->len; i++)
    block_corrupt(ledger, corrupt->pdata[i], host, claims);

  if (changed && !fsync_dir(ledger, error))
    return NULL;
  return g_steal_pointer(&claims);
}

/* ---- Claims from plans --------------------------------------------------- */

QpClaim *
qp_claim_from_plan(const QpPlan *plan, const char *id, const char *name)
{
  QpClaim *c = qp_claim_new();
  c->id = g_strdup(id);
  /* A record is JSON: a -name that is not UTF-8 must not corrupt it. */
  c->name = name != NULL ? g_utf8_make_valid(name, -1) : NULL;
  c->mode = plan->mode;
  if (plan->claim_mem)
    g_array_append_vals(c->mem, plan->claim_mem->data, plan->claim_mem->len);
  if (plan->claim_huge)
    g_array_append_vals(c->huge, plan->claim_huge->data, plan->claim_huge->len);
  if (plan->load)
    g_array_append_vals(c->load, plan->load->data, plan->load->len);
  qp_cpu_load_copy(c->cpu_load, plan->cpu_load);
  c->best_effort = plan->best_effort;
  if (plan->dedicated)
    hwloc_bitmap_copy(c->dedicated, plan->dedicated);
  c->time = g_get_real_time() / G_USEC_PER_SEC;
  return c;
}
