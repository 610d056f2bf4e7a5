/* The front (launcher/front/front.h) against the full program's parser: the
 * front runs QEMU straight only where the full program's settings (the
 * command line, QEMU_PIN_*, the config file read by GKeyFile) give mode
 * none or QEMU's command line asks for help; and it does wherever they do
 * and it can read them exactly. A table of cases, then random config files
 * and command lines. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher/front/front.h"
#include "launcher/options.h"
#include "launcher/qemu/args.h"
#include "launcher/qemu/vm-ids.h"

typedef enum {
  FULL_STRAIGHT, /* the full parser: QEMU runs as it is */
  FULL_LAUNCH,   /* a plan, a launch */
  FULL_ERROR,    /* qemu-pin refuses (its settings, or QEMU's line) */
} Full;

static const char *const full_names[] = {"straight", "launch", "error"};

static char *config_path;

/* The settings' environment: QEMU_PIN_CONFIG is always the test's file,
 * never the host's; ENV (NAME=VALUE, NULL-terminated) the rest. */
static void
set_env(const char *const *env)
{
  static const char *const names[] = {
      "QEMU_PIN_MODE",    "QEMU_PIN_QEMU",     "QEMU_PIN_DRY_RUN",
      "QEMU_PIN_VERBOSE", "QEMU_PIN_AFFINITY", "QEMU_PIN_STATE_DIR"};
  for (gsize i = 0; i < G_N_ELEMENTS(names); i++)
    g_unsetenv(names[i]);
  g_setenv("QEMU_PIN_CONFIG", config_path, TRUE);
  for (guint i = 0; env != NULL && env[i] != NULL; i++) {
    g_auto(GStrv) kv = g_strsplit(env[i], "=", 2);
    g_setenv(kv[0], kv[1], TRUE);
  }
}

/* What the full program's parser makes of QEMU's ARGV under OPTS (its
 * command line read): the path it took before the front. */
static Full
full_settings(QpOptions *opts, int argc, char **argv)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(QpVmIds) vm = qp_vm_ids_from_argv((guint)argc, argv);
  if (!qp_options_parse_env(opts, &error) ||
      !qp_options_load_config(opts, vm, &error))
    return FULL_ERROR;
  if (opts->placement.mode == QP_MODE_NONE)
    return opts->dry_run ? FULL_LAUNCH : FULL_STRAIGHT;
  g_autoptr(QpQemuArgs) args = qp_qemu_args_parse((guint)argc, argv, &error);
  if (args == NULL)
    return FULL_ERROR;
  return args->passthrough ? FULL_STRAIGHT : FULL_LAUNCH;
}

/* The same for qemu-pin's ARGV, ARGV[0] included. */
static Full
full_answer(int argc, char **argv)
{
  if (argc > 1 &&
      (strcmp(argv[1], "plan") == 0 || strcmp(argv[1], "topology") == 0 ||
       strcmp(argv[1], "status") == 0))
    return FULL_LAUNCH; /* a command of qemu-pin's: not QEMU run straight */
  QpOptions opts;
  qp_options_init(&opts);
  g_autofree char *base = g_path_get_basename(argv[0]);
  int first = 1;
  Full out = FULL_ERROR;
  if (!qp_is_qemu_name(base)) {
    g_autoptr(GError) error = NULL;
    int qi = 0;
    if (qp_options_parse_cli(&opts, argc, argv, TRUE, &qi, &error) && qi < argc)
      first = qi + 1;
    else
      first = -1;
  }
  if (first > 0)
    out = full_settings(&opts, argc - first, argv + first);
  qp_options_clear(&opts);
  return out;
}

/* The front's answer, with the argv it would exec checked. */
static gboolean
front_answer(int argc, char **argv)
{
  g_auto(GStrv) envp = g_get_environ();
  QpFrontExec e;
  if (!qp_front_decide(argc, argv, envp, &e))
    return FALSE;
  /* QEMU's arguments as given, after the caller's argv[0]. */
  guint n = g_strv_length(e.argv);
  g_assert_cmpuint(n, >=, 1);
  for (guint i = 1; i < n; i++)
    g_assert_cmpstr(e.argv[i], ==, argv[argc - (int)n + (int)i]);
  qp_front_exec_clear(&e);
  return TRUE;
}

typedef struct {
  const char *name;
  const char *argv[12]; /* qemu-pin's: "qemu-pin" or a QEMU name first */
  const char *env[3];
  const char *config;
  gboolean front; /* the front runs QEMU straight */
  Full full;
} Row;

#define QEMU "/usr/bin/qemu-system-x86_64"
#define LINE "-smp", "1", "-m", "64"
#define UUID "6b8f2c1e-0c4e-4a8b-9f3d-2d1c0e9a7b55"

static const Row rows[] = {
    {"cli-none",
     {"qemu-pin", "--mode=none", "--", QEMU, LINE},
     {NULL},
     "",
     TRUE,
     FULL_STRAIGHT},
    {"cli-none-spaced",
     {"qemu-pin", "-v", "--mode", "none", QEMU, LINE},
     {NULL},
     "",
     TRUE,
     FULL_STRAIGHT},
    {"cli-balanced",
     {"qemu-pin", "--mode=balanced", "--", QEMU, LINE},
     {NULL},
     "",
     FALSE,
     FULL_LAUNCH},
    {"cli-bad-mode",
     {"qemu-pin", "--mode=nonee", "--", QEMU, LINE},
     {NULL},
     "",
     FALSE,
     FULL_ERROR},
    {"cli-other-option",
     {"qemu-pin", "--mode=none", "--affinity=0", "--", QEMU, LINE},
     {NULL},
     "",
     FALSE,
     FULL_STRAIGHT},
    {"cli-dry-run",
     {"qemu-pin", "--mode=none", "--dry-run", "--", QEMU, LINE},
     {NULL},
     "",
     FALSE,
     FULL_LAUNCH},
    {"plan-command",
     {"qemu-pin", "plan", "--mode=none", "--", QEMU, LINE},
     {NULL},
     "",
     FALSE,
     FULL_LAUNCH},
    {"cli-beats-env",
     {"qemu-pin", "--mode=none", "--", QEMU, LINE},
     {"QEMU_PIN_MODE=balanced", NULL},
     "",
     TRUE,
     FULL_STRAIGHT},
    {"env-none",
     {"qemu-pin", QEMU, LINE},
     {"QEMU_PIN_MODE=none", NULL},
     "",
     TRUE,
     FULL_STRAIGHT},
    {"env-empty",
     {"qemu-pin", QEMU, LINE},
     {"QEMU_PIN_MODE=", NULL},
     "",
     FALSE,
     FULL_ERROR},
    {"env-dry-run",
     {"qemu-pin", QEMU, LINE},
     {"QEMU_PIN_MODE=none", "QEMU_PIN_DRY_RUN=1", NULL},
     "",
     FALSE,
     FULL_LAUNCH},
    {"env-beats-config",
     {"qemu-pin", QEMU, LINE},
     {"QEMU_PIN_MODE=numa", NULL},
     "[defaults]\nmode = none\n",
     FALSE,
     FULL_LAUNCH},
    {"defaults-none",
     {"qemu-pin", QEMU, LINE},
     {NULL},
     "# comment\n\n[defaults]\nmode = none\n",
     TRUE,
     FULL_STRAIGHT},
    {"name-group-over-defaults",
     {"qemu-pin", QEMU, LINE, "-name", "web"},
     {NULL},
     "[defaults]\nmode=numa\n[name:web]\nmode=none\n",
     TRUE,
     FULL_STRAIGHT},
    {"guest-name-group",
     {"qemu-pin", QEMU, LINE, "-name", "guest=web,debug-threads=on"},
     {NULL},
     "[name:web]\nmode=none\n",
     TRUE,
     FULL_STRAIGHT},
    {"escaped-name",
     {"qemu-pin", QEMU, LINE, "-name", "we,,b"},
     {NULL},
     "[name:we,b]\nmode=none\n",
     TRUE,
     FULL_STRAIGHT},
    {"other-vm-group",
     {"qemu-pin", QEMU, LINE, "-name", "db"},
     {NULL},
     "[name:web]\nmode=none\n",
     FALSE,
     FULL_LAUNCH},
    {"uuid-any-case",
     {"qemu-pin", QEMU, LINE, "-uuid", UUID},
     {NULL},
     "[uuid:6B8F2C1E-0C4E-4A8B-9F3D-2D1C0E9A7B55]\nmode = none\n",
     TRUE,
     FULL_STRAIGHT},
    {"later-group-wins",
     {"qemu-pin", QEMU, LINE, "-name", "web", "-id", "105"},
     {NULL},
     "[id:105]\nmode=none\n[name:web]\nmode=balanced\n",
     FALSE,
     FULL_LAUNCH},
    {"later-key-wins",
     {"qemu-pin", QEMU, LINE},
     {NULL},
     "[defaults]\nmode=numa\nmode=none\n",
     TRUE,
     FULL_STRAIGHT},
    /* The front leaves a value with blanks at its end to the full
     * program, which ignores them. */
    {"trailing-blank",
     {"qemu-pin", QEMU, LINE},
     {NULL},
     "[defaults]\nmode = none \n",
     FALSE,
     FULL_STRAIGHT},
    {"tab-indent",
     {"qemu-pin", QEMU, LINE},
     {NULL},
     "[defaults]\n\tmode = none\n",
     FALSE,
     FULL_STRAIGHT},
    {"group-twice",
     {"qemu-pin", QEMU, LINE},
     {NULL},
     "[defaults]\nmode=none\n[defaults]\nreserve-mib=1\n",
     FALSE,
     FULL_STRAIGHT},
    {"syntax-error",
     {"qemu-pin", QEMU, LINE},
     {NULL},
     "mode=none\n[defaults]\n",
     FALSE,
     FULL_ERROR},
    /* Only what decides the mode is read: an error elsewhere in the file
     * does not stop a VM that runs as it is (the full parser, which reads
     * everything, refuses it). */
    {"error-elsewhere",
     {"qemu-pin", QEMU, LINE, "-name", "web"},
     {NULL},
     "[name:web]\nmode=none\n[name:db]\naffinity=x\n",
     TRUE,
     FULL_ERROR},
    {"help",
     {"qemu-pin", QEMU, "-machine", "help"},
     {NULL},
     "[defaults]\nmode=numa\n",
     TRUE,
     FULL_STRAIGHT},
    {"device-help",
     {"qemu-pin", QEMU, "-device", "virtio-net-pci,help"},
     {NULL},
     "",
     TRUE,
     FULL_STRAIGHT},
    {"version",
     {"qemu-pin", QEMU, "-version"},
     {NULL},
     "",
     TRUE,
     FULL_STRAIGHT},
    {"probe",
     {"qemu-pin", QEMU, "-S", "-nodefaults", "-machine", "none,accel=tcg"},
     {NULL},
     "",
     TRUE,
     FULL_STRAIGHT},
    {"name-help-is-a-name",
     {"qemu-pin", QEMU, LINE, "-name", "help"},
     {NULL},
     "",
     FALSE,
     FULL_LAUNCH},
    {"daemonize-context",
     {"qemu-pin", "--mode=none", "--", QEMU, "-daemonize", "-object",
      "memory-backend-ram,id=m,size=64M,prealloc-context=t"},
     {NULL},
     "",
     FALSE,
     FULL_STRAIGHT},
    {"drop-in-env",
     {"qemu-system-x86_64", LINE},
     {"QEMU_PIN_MODE=none", "QEMU_PIN_QEMU=" QEMU, NULL},
     "",
     TRUE,
     FULL_STRAIGHT},
    {"drop-in-config-qemu",
     {"kvm", LINE, "-id", "105"},
     {NULL},
     "[defaults]\nqemu = " QEMU "\n[id:105]\nmode = none\n",
     TRUE,
     FULL_STRAIGHT},
    {"drop-in-launch",
     {"qemu-system-x86_64", LINE},
     {"QEMU_PIN_QEMU=" QEMU, NULL},
     "",
     FALSE,
     FULL_LAUNCH},
};

/* The front's answer with CONFIG, the full parser's with FULL_CONFIG. */
static void
run_case_with(const char *const *argv, const char *const *env,
              const char *config, const char *full_config, gboolean *front,
              Full *full)
{
  int argc = (int)g_strv_length((char **)argv);
  set_env(env);
  g_assert_true(g_file_set_contents(config_path, config, -1, NULL));
  *front = front_answer(argc, (char **)argv);
  g_assert_true(g_file_set_contents(config_path, full_config, -1, NULL));
  *full = full_answer(argc, (char **)argv);
}

static void
run_case(const char *const *argv, const char *const *env, const char *config,
         gboolean *front, Full *full)
{
  run_case_with(argv, env, config, config, front, full);
}

static void
test_row(gconstpointer data)
{
  const Row *row = data;
  gboolean front;
  Full full;
  run_case(row->argv, row->env, row->config, &front, &full);
  g_test_message("front %s, full parser %s", front ? "straight" : "full",
                 full_names[full]);
  g_assert_cmpint(front, ==, row->front);
  g_assert_cmpstr(full_names[full], ==, full_names[row->full]);
}

/* ---- Random cases ------------------------------------------------------- */

static const char *const groups[] = {
    "defaults",
    "name:web",
    "name:db",
    ("uuid:" UUID),
    "uuid:6B8F2C1E-0C4E-4A8B-9F3D-2D1C0E9A7B55",
    "id:105",
    "id:7"};
static const char *const modes[] = {"none", "none", "balanced",
                                    "numa", "auto", "one-to-one"};
static const char *const other_keys[] = {"reserve-mib = 128", "policy=bind",
                                         "strategy = pack", ("qemu = " QEMU)};
/* Lines outside the front's subset, each read by GKeyFile. */
static const char *const odd_lines[] = {
    "\tmode = none",  "mode = none  ", "  # indented comment",
    "mode=no\\x6ee",  "[defaults]",    "; a semicolon line=1",
    "mode[de] = none"};

static char *
random_config(GRand *r, gboolean *plain)
{
  GString *s = g_string_new(NULL);
  *plain = TRUE;
  guint n_groups = (guint)g_rand_int_range(r, 0, 5);
  gboolean used[G_N_ELEMENTS(groups)] = {FALSE};
  for (guint g = 0; g < n_groups; g++) {
    guint which = (guint)g_rand_int_range(r, 0, G_N_ELEMENTS(groups));
    if (used[which])
      continue;
    used[which] = TRUE;
    if (g_rand_boolean(r))
      g_string_append(s, "# settings\n\n");
    g_string_append_printf(s, "[%s]\n", groups[which]);
    guint n_keys = (guint)g_rand_int_range(r, 0, 4);
    for (guint k = 0; k < n_keys; k++) {
      if (g_rand_int_range(r, 0, 3) == 0) {
        g_string_append_printf(
            s, "%s\n",
            other_keys[g_rand_int_range(r, 0, G_N_ELEMENTS(other_keys))]);
        continue;
      }
      static const char *const eq[] = {"=", " = ", "= ", " ="};
      g_string_append_printf(
          s, "mode%s%s\n", eq[g_rand_int_range(r, 0, 4)],
          modes[g_rand_int_range(r, 0, G_N_ELEMENTS(modes))]);
    }
    if (g_rand_int_range(r, 0, 8) == 0) {
      g_string_append_printf(
          s, "%s\n",
          odd_lines[g_rand_int_range(r, 0, G_N_ELEMENTS(odd_lines))]);
      *plain = FALSE;
    }
  }
  return g_string_free(s, FALSE);
}

static void
test_random(void)
{
  g_autoptr(GRand) r = g_rand_new_with_seed(28);
  guint straight = 0, agreed = 0;
  for (guint i = 0; i < 3000; i++) {
    gboolean plain;
    g_autofree char *config = random_config(r, &plain);
    const char *argv[16] = {"qemu-pin", QEMU, "-smp", "1", "-m", "64"};
    guint n = 6;
    if (g_rand_boolean(r)) {
      argv[n++] = "-name";
      argv[n++] = g_rand_boolean(r) ? "web" : "guest=db,debug-threads=on";
    }
    if (g_rand_boolean(r)) {
      argv[n++] = "-uuid";
      argv[n++] = UUID;
    }
    if (g_rand_boolean(r)) {
      argv[n++] = "-id";
      argv[n++] = g_rand_boolean(r) ? "105" : "7";
    }
    static const char *const env_modes[] = {NULL, "QEMU_PIN_MODE=none",
                                            "QEMU_PIN_MODE=balanced"};
    const char *env[] = {env_modes[g_rand_int_range(r, 0, 3)], NULL};
    gboolean front;
    Full full;
    /* Where QEMU_PIN_MODE decides, the config file is not read at all:
     * the full parser is asked without it. */
    run_case_with(argv, env, config, env[0] != NULL ? "" : config, &front,
                  &full);
    if (front != (full == FULL_STRAIGHT) && (front || plain))
      g_error("case %u: front %s, full parser %s, env %s, config:\n%s", i,
              front ? "straight" : "full", full_names[full],
              env[0] ? env[0] : "-", config);
    straight += front;
    agreed += plain;
  }
  g_test_message("%u of 3000 run straight by the front; %u plain configs",
                 straight, agreed);
  /* Both kinds were drawn. */
  g_assert_cmpuint(straight, >, 300);
  g_assert_cmpuint(straight, <, 2700);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  int fd = g_file_open_tmp("qp-front-XXXXXX.conf", &config_path, NULL);
  g_assert_cmpint(fd, >=, 0);
  close(fd);
  for (gsize i = 0; i < G_N_ELEMENTS(rows); i++) {
    g_autofree char *path = g_strdup_printf("/front/agrees/%s", rows[i].name);
    g_test_add_data_func(path, &rows[i], test_row);
  }
  g_test_add_func("/front/agrees/random-configs-and-lines", test_random);
  int rc = g_test_run();
  unlink(config_path);
  g_free(config_path);
  return rc;
}
