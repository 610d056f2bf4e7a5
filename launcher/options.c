#include "launcher/options.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "topology/base/cpulist.h"

/* The launcher's error domain (qp-error.h); the quark's name is the
 * argument as written. */
/* clang-format off */
G_DEFINE_QUARK(qp-launch-error-quark, qp_launch_error)
/* clang-format on */

typedef enum {
  IN_CLI = 1 << 0,
  IN_ENV = 1 << 1,
  IN_CONFIG = 1 << 2,
} Where;

typedef struct {
  const char *name; /* --NAME, config key NAME */
  const char *env;  /* environment twin */
  Where where;
  const char *arg; /* value description for --help; NULL: a flag */
  const char *help;
} Setting;

/* Every setting qemu-pin knows, in --help order. */
static const Setting settings[] = {
    {"mode", "QEMU_PIN_MODE", IN_CLI | IN_ENV | IN_CONFIG,
     "auto|none|balanced|numa|one-to-one", "placement mode (default auto)"},
    {"affinity", "QEMU_PIN_AFFINITY", IN_CLI | IN_ENV | IN_CONFIG, "CPULIST",
     "host CPUs the VM may use"},
    {"hostnodes", "QEMU_PIN_HOSTNODES", IN_CLI | IN_ENV | IN_CONFIG, "NODELIST",
     "host NUMA nodes the VM may use"},
    {"policy", "QEMU_PIN_POLICY", IN_CLI | IN_ENV | IN_CONFIG,
     "bind|preferred|interleave", "memory policy of bindings (default bind)"},
    {"strategy", "QEMU_PIN_STRATEGY", IN_CLI | IN_ENV | IN_CONFIG,
     "spread|pack",
     "among fitting nodes: most room (spread) or tightest fit (pack)"},
    {"smt", "QEMU_PIN_SMT", IN_CLI | IN_ENV | IN_CONFIG, "prefer|strict",
     "one-to-one: use SMT siblings last (prefer) or never (strict)"},
    {"device-locality", "QEMU_PIN_DEVICE_LOCALITY", IN_CLI | IN_ENV | IN_CONFIG,
     "preferred|required|ignore",
     "keep the VM and its iothreads near its devices"},
    {"vnuma", "QEMU_PIN_VNUMA", IN_CLI | IN_ENV | IN_CONFIG, "auto|off",
     "give a guest without -numa a topology mirroring the placement"},
    {"reserve-mib", "QEMU_PIN_RESERVE_MIB", IN_CLI | IN_ENV | IN_CONFIG, "MIB",
     "memory of each node kept for the host"},
    {"node-reserve-mib", "QEMU_PIN_NODE_RESERVE_MIB",
     IN_CLI | IN_ENV | IN_CONFIG, "NODE:MIB,...", "per-node host reserve"},
    {"config", "QEMU_PIN_CONFIG", IN_CLI | IN_ENV, "FILE",
     "configuration file (default " QP_DEFAULT_CONFIG ")"},
    {"state-dir", "QEMU_PIN_STATE_DIR", IN_CLI | IN_ENV | IN_CONFIG, "DIR",
     "ledger directory (default /run/qemu-pin when writable, else "
     "$XDG_RUNTIME_DIR/qemu-pin)"},
    {"qemu", "QEMU_PIN_QEMU", IN_ENV | IN_CONFIG, "PATH",
     "the real QEMU binary when qemu-pin runs under a QEMU name"},
    {"topology", "QEMU_PIN_TOPOLOGY", IN_CLI | IN_ENV, "FILE",
     "plan on a recorded hwloc XML host instead of this one"},
    {"qmp-timeout", "QEMU_PIN_QMP_TIMEOUT", IN_CLI | IN_ENV | IN_CONFIG, "MS",
     "longest wait for a QMP reply (default 30000)"},
    {"start-timeout", "QEMU_PIN_START_TIMEOUT", IN_CLI | IN_ENV | IN_CONFIG,
     "MS", "longest wait for QEMU's QMP greeting (default 120000)"},
    {"make-room", "QEMU_PIN_MAKE_ROOM", IN_CLI | IN_ENV | IN_CONFIG, NULL,
     "launch: move running VMs first when that keeps this one on fewer "
     "nodes"},
    {"rebalance-min-mib", "QEMU_PIN_REBALANCE_MIN_MIB",
     IN_CLI | IN_ENV | IN_CONFIG, "MIB",
     "rebalance: move only when that brings this much of spanning VMs onto "
     "one node"},
    {"dry-run", "QEMU_PIN_DRY_RUN", IN_CLI | IN_ENV, NULL,
     "print the plan as JSON, launch nothing"},
    {"verbose", "QEMU_PIN_VERBOSE", IN_CLI | IN_ENV, NULL,
     "say what is done, with the keeper's timestamps (-v); more (-vv)"},
};

static const Setting *
find_setting(const char *name)
{
  for (gsize i = 0; i < G_N_ELEMENTS(settings); i++)
    if (strcmp(settings[i].name, name) == 0)
      return &settings[i];
  return NULL;
}

void
qp_options_init(QpOptions *opts)
{
  memset(opts, 0, sizeof(*opts));
  qp_placement_options_init(&opts->placement);
  /* A QMP reply takes milliseconds, but seconds on a host where many
   * VMs start at once (the lab's nested TCG guests took over 5 s); 30 s is
   * what libvirt waits for its monitor. */
  opts->qmp_timeout_ms = 30000;
  opts->start_timeout_ms = 120000;
  opts->given = g_hash_table_new(g_str_hash, g_str_equal);
}

void
qp_options_clear(QpOptions *opts)
{
  qp_placement_options_clear(&opts->placement);
  g_clear_pointer(&opts->config, g_free);
  g_clear_pointer(&opts->state_dir, g_free);
  g_clear_pointer(&opts->qemu, g_free);
  g_clear_pointer(&opts->topology, g_free);
  g_clear_pointer(&opts->picture, g_free);
  g_clear_pointer(&opts->given, g_hash_table_unref);
}

static gboolean
bad_value(GError **error, const char *origin, const char *value,
          const char *expected)
{
  g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
              "%s: '%s' is not valid: expected %s", origin, value, expected);
  return FALSE;
}

static gboolean
parse_uint(const char *text, guint64 max, guint64 *out)
{
  if (text == NULL || !g_ascii_isdigit(*text))
    return FALSE;
  char *end = NULL;
  errno = 0;
  guint64 v = g_ascii_strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0' || v > max)
    return FALSE;
  *out = v;
  return TRUE;
}

static gboolean
parse_bool(const char *text, gboolean *out)
{
  static const char *yes[] = {"1", "yes", "true", "on"};
  static const char *no[] = {"0", "no", "false", "off"};
  for (gsize i = 0; i < G_N_ELEMENTS(yes); i++) {
    if (g_ascii_strcasecmp(text, yes[i]) == 0) {
      *out = TRUE;
      return TRUE;
    }
    if (g_ascii_strcasecmp(text, no[i]) == 0) {
      *out = FALSE;
      return TRUE;
    }
  }
  return FALSE;
}

static gboolean
parse_node_reserve(const char *text, GArray **out)
{
  g_autoptr(GArray) arr = g_array_new(FALSE, TRUE, sizeof(QpNodeAmount));
  g_auto(GStrv) parts = g_strsplit(text, ",", -1);
  if (parts[0] == NULL)
    return FALSE;
  for (guint i = 0; parts[i] != NULL; i++) {
    const char *colon = strchr(parts[i], ':');
    guint64 node, mib;
    if (colon == NULL)
      return FALSE;
    g_autofree char *n = g_strndup(parts[i], (gsize)(colon - parts[i]));
    if (!parse_uint(n, QP_LIST_MAX_INDEX, &node) ||
        !parse_uint(colon + 1, G_MAXUINT64 / 2, &mib))
      return FALSE;
    /* A node given twice: which one was meant? */
    for (guint k = 0; k < arr->len; k++)
      if (g_array_index(arr, QpNodeAmount, k).node == (int)node)
        return FALSE;
    QpNodeAmount a = {(int)node, mib};
    g_array_append_val(arr, a);
  }
  *out = g_steal_pointer(&arr);
  return TRUE;
}

/* qemu-pin's own settings (qp_options_set() has the placement's). */
static gboolean
set_own(QpOptions *opts, const char *name, const char *value,
        const char *origin, GError **error)
{
  guint64 u;

  if (strcmp(name, "config") == 0) {
    if (*value == '\0')
      return bad_value(error, origin, value, "a file name");
    g_free(opts->config);
    opts->config = g_strdup(value);
    opts->config_explicit = TRUE;
  } else if (strcmp(name, "state-dir") == 0) {
    if (*value == '\0')
      return bad_value(error, origin, value, "a directory");
    g_free(opts->state_dir);
    opts->state_dir = g_strdup(value);
  } else if (strcmp(name, "qemu") == 0) {
    if (*value == '\0')
      return bad_value(error, origin, value, "the path of a QEMU binary");
    g_free(opts->qemu);
    opts->qemu = g_strdup(value);
  } else if (strcmp(name, "topology") == 0) {
    if (*value == '\0')
      return bad_value(error, origin, value, "an hwloc XML file");
    g_free(opts->topology);
    opts->topology = g_strdup(value);
  } else if (strcmp(name, "qmp-timeout") == 0 ||
             strcmp(name, "start-timeout") == 0) {
    if (!parse_uint(value, 24 * 3600 * 1000, &u) || u == 0)
      return bad_value(error, origin, value, "milliseconds from 1 to 86400000");
    if (name[0] == 'q')
      opts->qmp_timeout_ms = (guint)u;
    else
      opts->start_timeout_ms = (guint)u;
  } else if (strcmp(name, "dry-run") == 0 || strcmp(name, "make-room") == 0) {
    if (!parse_bool(value, name[0] == 'd' ? &opts->dry_run : &opts->make_room))
      return bad_value(error, origin, value,
                       "1, 0, yes, no, true, false, on or off");
  } else if (strcmp(name, "rebalance-min-mib") == 0) {
    if (!parse_uint(value, G_MAXUINT64 / 2, &u))
      return bad_value(error, origin, value,
                       "a size in MiB such as 1024 (0: any gain)");
    opts->rebalance_min_mib = u;
  } else if (strcmp(name, "verbose") == 0) {
    if (!parse_uint(value, 9, &u))
      return bad_value(error, origin, value, "a level from 0 to 9");
    opts->verbose = (int)u;
  } else {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
                "%s: unknown setting '%s'", origin, name);
    return FALSE;
  }
  return TRUE;
}

gboolean
qp_options_set(QpOptions *opts, const char *name, const char *value,
               const char *origin, GError **error)
{
  QpPlacementOptions *p = &opts->placement;
  guint64 u;

  if (strcmp(name, "mode") == 0) {
    if (!qp_mode_parse(value, &p->mode))
      return bad_value(error, origin, value,
                       "auto, none, balanced, numa or one-to-one");
  } else if (strcmp(name, "affinity") == 0 || strcmp(name, "hostnodes") == 0) {
    hwloc_bitmap_t set = NULL;
    g_autoptr(GError) local = NULL;
    if (!qp_list_parse(value, origin, QP_LIST_MAX_INDEX, &set, &local)) {
      /* A bad setting is bad usage, whoever parsed it. */
      g_set_error_literal(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
                          local->message);
      return FALSE;
    }
    hwloc_bitmap_t *dst = name[0] == 'a' ? &p->affinity : &p->hostnodes;
    g_clear_pointer(dst, hwloc_bitmap_free);
    *dst = set;
  } else if (strcmp(name, "policy") == 0) {
    if (!qp_policy_parse(value, &p->policy) || p->policy == QP_POLICY_DEFAULT)
      return bad_value(error, origin, value, "bind, preferred or interleave");
  } else if (strcmp(name, "strategy") == 0) {
    if (!qp_strategy_parse(value, &p->strategy))
      return bad_value(error, origin, value, "spread or pack");
  } else if (strcmp(name, "smt") == 0) {
    if (!qp_smt_parse(value, &p->smt))
      return bad_value(error, origin, value, "prefer or strict");
  } else if (strcmp(name, "device-locality") == 0) {
    if (!qp_device_locality_parse(value, &p->device_locality))
      return bad_value(error, origin, value, "preferred, required or ignore");
  } else if (strcmp(name, "vnuma") == 0) {
    if (strcmp(value, "auto") == 0)
      p->vnuma = TRUE;
    else if (strcmp(value, "off") == 0)
      p->vnuma = FALSE;
    else
      return bad_value(error, origin, value, "auto or off");
  } else if (strcmp(name, "reserve-mib") == 0) {
    if (!parse_uint(value, G_MAXUINT64 / 2, &u))
      return bad_value(error, origin, value, "a size in MiB such as 1024");
    p->reserve_mib = u;
  } else if (strcmp(name, "node-reserve-mib") == 0) {
    GArray *arr = NULL;
    if (!parse_node_reserve(value, &arr))
      return bad_value(
          error, origin, value,
          "NODE:MIB pairs separated by commas, each node once, such as "
          "0:1024,1:512");
    g_clear_pointer(&p->node_reserve, g_array_unref);
    p->node_reserve = arr;
  } else {
    return set_own(opts, name, value, origin, error);
  }
  return TRUE;
}

/* ---- Command line ------------------------------------------------------- */

static gboolean
cli_value(const char *option_name, const char *value, gpointer data,
          GError **error)
{
  QpOptions *opts = data;
  const char *name = option_name + 2; /* "--mode" -> "mode" */
  const Setting *s = find_setting(name);
  g_assert(s != NULL);
  g_hash_table_add(opts->given, (gpointer)s->name);
  return qp_options_set(opts, name, value, option_name, error);
}

static gboolean
cli_flag(const char *option_name, const char *value, gpointer data,
         GError **error)
{
  QpOptions *opts = data;
  if (strcmp(option_name, "-v") == 0 || strcmp(option_name, "--verbose") == 0) {
    opts->verbose++;
    g_hash_table_add(opts->given, (gpointer) "verbose");
  } else if (strcmp(option_name, "--dry-run") == 0) {
    opts->dry_run = TRUE;
    g_hash_table_add(opts->given, (gpointer) "dry-run");
  } else if (strcmp(option_name, "--make-room") == 0) {
    opts->make_room = TRUE;
    g_hash_table_add(opts->given, (gpointer) "make-room");
  } else if (strcmp(option_name, "--human") == 0) {
    opts->human = TRUE;
  } else if (strcmp(option_name, "--json") == 0) {
    opts->json = TRUE;
  } else if (strcmp(option_name, "--prune") == 0) {
    opts->prune = TRUE;
  } else if (strcmp(option_name, "--metrics") == 0) {
    opts->metrics = TRUE;
  }
  return TRUE;
}

static char help_text[4096];

static void
build_help(void)
{
  if (help_text[0] != '\0')
    return;
  GString *s = g_string_new(
      "Usage:\n"
      "  qemu-pin [OPTIONS] [--] QEMU_BINARY [QEMU_ARGS...]\n"
      "  qemu-pin plan [OPTIONS] [--human] [--] QEMU_BINARY [QEMU_ARGS...]\n"
      "  qemu-pin topology [--json] [--topology=FILE]\n"
      "  qemu-pin status [--json|--metrics] [--prune] [--picture=FILE] "
      "[--state-dir=DIR]\n"
      "                  [--topology=FILE] [--reserve-mib=MIB]\n"
      "                  [--node-reserve-mib=NODE:MIB,...]\n"
      "  qemu-pin move VM --to-nodes=NODELIST [--rate=MIB] "
      "[--state-dir=DIR] [--json]\n"
      "  qemu-pin rebalance [--dry-run] [--json] [--cooldown=SECONDS] "
      "[--state-dir=DIR]\n"
      "                     [OPTIONS] [-- QEMU_BINARY QEMU_ARGS...]\n"
      "  QEMU_NAME [QEMU_ARGS...]   (qemu-pin installed as qemu-system-* or "
      "kvm)\n"
      "\n"
      "Places a VM's vCPUs and memory on a NUMA host, claims that room in a\n"
      "host-wide ledger, and runs QEMU with the plan in force.\n"
      "\nOptions (environment twin in brackets):\n");
  for (gsize i = 0; i < G_N_ELEMENTS(settings); i++) {
    const Setting *st = &settings[i];
    if (!(st->where & IN_CLI))
      continue;
    g_autofree char *left = st->arg != NULL
                                ? g_strdup_printf("--%s=%s", st->name, st->arg)
                                : g_strdup_printf("--%s", st->name);
    g_string_append_printf(s, "  %s\n      %s [%s]\n", left, st->help, st->env);
  }
  g_string_append(
      s,
      "  --human     plan: a readable table instead of JSON\n"
      "  --json      topology, status: JSON\n"
      "  --metrics   status: Prometheus text exposition format\n"
      "  --to-nodes=NODELIST\n"
      "              move: the host nodes to move the VM to\n"
      "  --rate=MIB  move: MiB of pages moved per second (default 512, 0: "
      "no limit)\n"
      "  --cooldown=SECONDS\n"
      "              rebalance: a VM moved less than this ago stays (default "
      "600)\n"
      "  --prune     status: remove records of VMs that are gone (root: "
      "anyone's)\n"
      "  --picture=FILE.png|FILE.svg\n"
      "              status: draw the host and the VMs' claims with lstopo\n"
      "  -v          more output; -h, --help; --version\n"
      "\nExit status: QEMU's own once QEMU runs; 1 when qemu-pin refuses or\n"
      "fails to launch (a one-line reason on stderr); 2 for bad usage.\n");
  g_strlcpy(help_text, s->str, sizeof(help_text));
  g_string_free(s, TRUE);
}

const char *
qp_options_help(void)
{
  build_help();
  return help_text;
}

gboolean
qp_options_parse_cli(QpOptions *opts, int argc, char **argv,
                     gboolean allow_qemu, int *qemu_index, GError **error)
{
  int i = 1;
  for (;; i++) {
    const char *a = i < argc ? argv[i] : NULL;
    QpCliWord w;
    qp_cli_word(argc, argv, &i, &w);
    if (w.kind == QP_CLI_END)
      break;
    if (w.kind == QP_CLI_VERBOSE) {
      opts->verbose += w.verbose;
      g_hash_table_add(opts->given, (gpointer) "verbose");
      continue;
    }
    if (w.kind == QP_CLI_BAD) {
      g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
                  "unknown option '%s': see qemu-pin --help", a);
      return FALSE;
    }
    const char *eq = w.eq;
    g_autofree char *name = g_strndup(w.name, w.name_len);
    g_autofree char *opt = g_strdup_printf("--%s", name);
    const Setting *s = find_setting(name);
    if (strcmp(name, "picture") == 0) {
      const char *file = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
      if (file == NULL || *file == '\0') {
        g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
                    "option '--picture' needs a value: FILE.png or FILE.svg");
        return FALSE;
      }
      g_free(opts->picture);
      opts->picture = g_strdup(file);
      continue;
    }
    if (s == NULL || !(s->where & IN_CLI)) {
      if (strcmp(name, "human") == 0 || strcmp(name, "json") == 0 ||
          strcmp(name, "prune") == 0 || strcmp(name, "metrics") == 0) {
        if (eq != NULL)
          goto takes_no_value;
        cli_flag(opt, NULL, opts, NULL);
        continue;
      }
      g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
                  "unknown option '%s': see qemu-pin --help", a);
      return FALSE;
    }
    if (s->arg == NULL) {
      if (eq != NULL)
        goto takes_no_value;
      cli_flag(opt, NULL, opts, NULL);
      continue;
    }
    const char *value;
    if (eq != NULL)
      value = eq + 1;
    else if (i + 1 < argc)
      value = argv[++i];
    else {
      g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
                  "option '%s' needs a value: %s", a, s->arg);
      return FALSE;
    }
    if (!cli_value(opt, value, opts, error))
      return FALSE;
    continue;

  takes_no_value:
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
                "option '--%s' takes no value (got '%s')", name, eq + 1);
    return FALSE;
  }
  if (i < argc && !allow_qemu) {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
                "unexpected argument '%s': this command takes options only",
                argv[i]);
    return FALSE;
  }
  *qemu_index = i;
  return TRUE;
}

/* ---- Environment -------------------------------------------------------- */

gboolean
qp_options_parse_env(QpOptions *opts, GError **error)
{
  for (gsize i = 0; i < G_N_ELEMENTS(settings); i++) {
    const Setting *s = &settings[i];
    const char *value = g_getenv(s->env);
    if (value == NULL || g_hash_table_contains(opts->given, s->name))
      continue;
    if (!qp_options_set(opts, s->name, value, s->env, error))
      return FALSE;
    g_hash_table_add(opts->given, (gpointer)s->name);
  }
  return TRUE;
}

/* ---- Config file -------------------------------------------------------- */

/* Line numbers (1-based) of every [group] header and key of a config
 * text, keyed "group" and "group\nkey" (GKeyFile keeps none). Built once
 * per file: looking each key up in the text was quadratic. */
static GHashTable *
config_lines(const char *text)
{
  GHashTable *lines =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  g_auto(GStrv) split = g_strsplit(text, "\n", -1);
  g_autofree char *group = NULL;
  for (guint i = 0; split[i] != NULL; i++) {
    g_autofree char *l = g_strstrip(g_strdup(split[i]));
    gsize n = strlen(l);
    if (l[0] == '[' && n >= 2 && l[n - 1] == ']') {
      g_free(group);
      group = g_strndup(l + 1, n - 2);
      if (!g_hash_table_contains(lines, group))
        g_hash_table_insert(lines, g_strdup(group), GUINT_TO_POINTER(i + 1));
      continue;
    }
    const char *eq = strchr(l, '=');
    if (group == NULL || eq == NULL || l[0] == '#' || l[0] == ';')
      continue;
    g_autofree char *k = g_strstrip(g_strndup(l, (gsize)(eq - l)));
    char *key = g_strdup_printf("%s\n%s", group, k);
    if (g_hash_table_contains(lines, key))
      g_free(key);
    else
      g_hash_table_insert(lines, key, GUINT_TO_POINTER(i + 1));
  }
  return lines;
}

static guint
config_line(GHashTable *lines, const char *group, const char *key)
{
  g_autofree char *k =
      key ? g_strdup_printf("%s\n%s", group, key) : g_strdup(group);
  return GPOINTER_TO_UINT(g_hash_table_lookup(lines, k));
}

/* GKeyFile's own syntax errors carry no line number: find the first line
 * that is neither blank, a comment, a [group] nor a key=value. */
static gboolean
check_syntax(const char *path, const char *text, GError **error)
{
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++) {
    g_autofree char *l = g_strstrip(g_strdup(lines[i]));
    gsize n = strlen(l);
    if (n == 0 || l[0] == '#' || l[0] == ';')
      continue;
    if (l[0] == '[' && l[n - 1] == ']' && n > 2)
      continue;
    const char *eq = strchr(l, '=');
    /* GKeyFile reads KEY[LOCALE] as KEY in that locale only: such a key
     * would be checked, or ignored, by the caller's LANG. */
    const char *bracket = eq != NULL ? memchr(l, '[', (gsize)(eq - l)) : NULL;
    if (l[0] != '[' && bracket != NULL) {
      g_autofree char *key = g_strstrip(g_strndup(l, (gsize)(eq - l)));
      g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
                  "%s:%u: key '%s' is not valid: qemu-pin's keys take no "
                  "[locale]",
                  path, i + 1, key);
      return FALSE;
    }
    if (l[0] != '[' && eq != NULL && eq != l)
      continue;
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
                "%s:%u: '%s' is not valid: expected [group], key=value or a "
                "# or ; comment",
                path, i + 1, l);
    return FALSE;
  }
  return TRUE;
}

static gboolean
group_matches(const char *group, const QpVmIds *vm)
{
  if (vm == NULL)
    return FALSE;
  if (g_str_has_prefix(group, "name:"))
    return vm->name != NULL && strcmp(group + 5, vm->name) == 0;
  if (g_str_has_prefix(group, "uuid:"))
    return vm->uuid != NULL && g_ascii_strcasecmp(group + 5, vm->uuid) == 0;
  if (g_str_has_prefix(group, "id:"))
    return vm->id != NULL && strcmp(group + 3, vm->id) == 0;
  return FALSE;
}

static gboolean
apply_group(QpOptions *opts, GKeyFile *kf, const char *path, GHashTable *lines,
            const char *group, gboolean apply, GError **error)
{
  g_auto(GStrv) keys = g_key_file_get_keys(kf, group, NULL, NULL);
  for (guint i = 0; keys != NULL && keys[i] != NULL; i++) {
    const char *key = keys[i];
    const Setting *s = find_setting(key);
    guint line = config_line(lines, group, key);
    if (s == NULL || !(s->where & IN_CONFIG)) {
      GString *known = g_string_new(NULL);
      for (gsize j = 0; j < G_N_ELEMENTS(settings); j++)
        if (settings[j].where & IN_CONFIG)
          g_string_append_printf(known, "%s%s", known->len ? ", " : "",
                                 settings[j].name);
      g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
                  "%s:%u: unknown key '%s' in [%s]: expected one of %s", path,
                  line, key, group, known->str);
      g_string_free(known, TRUE);
      return FALSE;
    }
    g_autoptr(GError) local = NULL;
    g_autofree char *value = g_key_file_get_string(kf, group, key, &local);
    /* GKeyFile keeps blanks at the end of a value: invisible, and never
     * meant. */
    if (value != NULL)
      g_strchomp(value);
    if (value == NULL) {
      g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
                  "%s:%u: key '%s': %s", path, line, key, local->message);
      return FALSE;
    }
    g_autofree char *origin = g_strdup_printf("%s:%u: %s", path, line, key);
    /* Values of groups that are not this VM's are still checked. */
    QpOptions scratch;
    QpOptions *target = opts;
    if (!apply || g_hash_table_contains(opts->given, s->name)) {
      qp_options_init(&scratch);
      target = &scratch;
    }
    gboolean ok = qp_options_set(target, s->name, value, origin, error);
    if (target == &scratch)
      qp_options_clear(&scratch);
    if (!ok)
      return FALSE;
  }
  return TRUE;
}

gboolean
qp_options_load_config(QpOptions *opts, const QpVmIds *vm, GError **error)
{
  const char *path = opts->config ? opts->config : QP_DEFAULT_CONFIG;
  g_autofree char *text = NULL;
  gsize len = 0;
  g_autoptr(GError) local = NULL;

  /* Most hosts have no config: say so without a GError, whose message
   * (g_strerror, the file name for display) loads the C library's iconv
   * tables on every launch. */
  if (!opts->config_explicit && access(path, F_OK) < 0 && errno == ENOENT)
    return TRUE;
  if (!g_file_get_contents(path, &text, &len, &local)) {
    if (!opts->config_explicit &&
        g_error_matches(local, G_FILE_ERROR, G_FILE_ERROR_NOENT))
      return TRUE;
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
                "config file %s cannot be read: %s", path, local->message);
    return FALSE;
  }
  if (!g_utf8_validate(text, (gssize)len, NULL) || memchr(text, '\0', len)) {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
                "config file %s is not UTF-8 text", path);
    return FALSE;
  }
  if (!check_syntax(path, text, error))
    return FALSE;
  /* GKeyFile takes only # for a comment; ; is the ini files' own. */
  for (char *l = text; l != NULL && *l != '\0';) {
    l += strspn(l, " \t");
    if (*l == ';')
      *l = '#';
    l = strchr(l, '\n');
    l = l != NULL ? l + 1 : NULL;
  }

  g_autoptr(GKeyFile) kf = g_key_file_new();
  if (!g_key_file_load_from_data(kf, text, len, G_KEY_FILE_NONE, &local)) {
    g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE, "%s: %s", path,
                local->message);
    return FALSE;
  }

  g_auto(GStrv) groups = g_key_file_get_groups(kf, NULL);
  g_autoptr(GHashTable) lines = config_lines(text);
  /* Check every group, so that a mistake is found before the VM it
   * concerns is started, then apply [defaults] and the VM's groups. */
  for (guint i = 0; groups[i] != NULL; i++) {
    const char *g = groups[i];
    if (strcmp(g, "defaults") != 0 && !g_str_has_prefix(g, "name:") &&
        !g_str_has_prefix(g, "uuid:") && !g_str_has_prefix(g, "id:")) {
      g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
                  "%s:%u: unknown group [%s]: expected [defaults], "
                  "[name:VM], [uuid:UUID] or [id:N]",
                  path, config_line(lines, g, NULL), g);
      return FALSE;
    }
    /* A group no VM can match is a mistake, not a group for later. */
    const char *what = NULL;
    if (g_str_has_prefix(g, "name:") && g[5] == '\0')
      what = "a VM name after 'name:'";
    else if (g_str_has_prefix(g, "uuid:") && !g_uuid_string_is_valid(g + 5))
      what = "a UUID after 'uuid:' (8-4-4-4-12 hex digits)";
    else if (g_str_has_prefix(g, "id:") &&
             (g[3] == '\0' || strspn(g + 3, "0123456789") != strlen(g + 3)))
      what = "a number after 'id:' (the VM ID of Proxmox VE's -id)";
    if (what != NULL) {
      g_set_error(error, QP_LAUNCH_ERROR, QP_LAUNCH_ERROR_USAGE,
                  "%s:%u: group [%s] names no VM: expected %s", path,
                  config_line(lines, g, NULL), g, what);
      return FALSE;
    }
    if (!apply_group(opts, kf, path, lines, g, FALSE, error))
      return FALSE;
  }
  if (g_key_file_has_group(kf, "defaults") &&
      !apply_group(opts, kf, path, lines, "defaults", TRUE, error))
    return FALSE;
  for (guint i = 0; groups[i] != NULL; i++)
    if (group_matches(groups[i], vm) &&
        !apply_group(opts, kf, path, lines, groups[i], TRUE, error))
      return FALSE;
  return TRUE;
}
