/* The front's decision (front.h): QEMU straight, or the full program. */
#include "launcher/front/front.h"

#include <stdlib.h>
#include <string.h>

const char *
qp_front_getenv(char **envp, const char *name)
{
  size_t n = strlen(name);
  for (char **e = envp; e != NULL && *e != NULL; e++)
    if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
      return *e + n + 1;
  return NULL;
}

/* What the front read of qemu-pin's own settings. */
typedef struct {
  const char *mode;   /* from the command line or QEMU_PIN_MODE */
  const char *config; /* --config or QEMU_PIN_CONFIG */
  unsigned qemu;      /* argv index of QEMU's binary (launcher) */
} Settings;

/* The value of option A (--NAME=VALUE or --NAME VALUE) at *I. */
static const char *
option_value(int argc, char **argv, int *i, const char *eq)
{
  if (eq != NULL)
    return eq + 1;
  return *i + 1 < argc ? argv[++*i] : NULL;
}

void
qp_cli_word(int argc, char **argv, int *i, QpCliWord *w)
{
  *w = (QpCliWord){.kind = QP_CLI_END};
  const char *a = *i < argc ? argv[*i] : NULL;
  if (a == NULL || a[0] != '-' || a[1] == '\0')
    return;
  if (strcmp(a, "--") == 0) {
    ++*i;
    return;
  }
  /* -v, -vv, -vvv... (each v a level) or --verbose. */
  size_t vs = a[1] == 'v' ? strspn(a + 1, "v") : 0;
  if ((vs > 0 && a[1 + vs] == '\0') || strcmp(a, "--verbose") == 0) {
    w->kind = QP_CLI_VERBOSE;
    w->verbose = vs > 0 ? (int)vs : 1;
    return;
  }
  if (strncmp(a, "--", 2) != 0) {
    w->kind = QP_CLI_BAD;
    return;
  }
  w->kind = QP_CLI_LONG;
  w->name = a + 2;
  w->eq = strchr(a, '=');
  w->name_len = w->eq ? (size_t)(w->eq - w->name) : strlen(w->name);
}

/* qemu-pin [OPTIONS] [--] QEMU ARGS: the options the front reads exactly
 * as the full program does (--mode=none, --config, --state-dir, -v). */
static int
read_cli(int argc, char **argv, Settings *s)
{
  static const char *const commands[] = {"plan", "topology", "status", "move",
                                         "rebalance"};
  for (size_t c = 0; argc > 1 && c < sizeof(commands) / sizeof(*commands); c++)
    if (strcmp(argv[1], commands[c]) == 0)
      return 0;
  int i = 1;
  for (;; i++) {
    QpCliWord w;
    qp_cli_word(argc, argv, &i, &w);
    if (w.kind == QP_CLI_END)
      break;
    if (w.kind == QP_CLI_VERBOSE)
      continue;
    if (w.kind == QP_CLI_BAD)
      return 0;
    size_t n = w.name_len;
    const char *v = NULL;
    if ((n == 4 && strncmp(w.name, "mode", 4) == 0) ||
        (n == 6 && strncmp(w.name, "config", 6) == 0) ||
        (n == 9 && strncmp(w.name, "state-dir", 9) == 0))
      v = option_value(argc, argv, &i, w.eq);
    /* Any other value of --mode is the full program's to check. */
    if (v == NULL || *v == '\0' || (n == 4 && strcmp(v, "none") != 0))
      return 0;
    if (n == 4)
      s->mode = v;
    else if (n == 6)
      s->config = v;
  }
  if (i >= argc)
    return 0;
  s->qemu = (unsigned)i;
  return 1;
}

/* -daemonize with a memory backend's prealloc-context: the full program
 * takes it off (launcher/qemu/daemonize.c). */
static int
daemonize_edit(unsigned argc, char **argv)
{
  QpOpt o;
  const char *missing;
  int daemonize = 0, context = 0;
  for (unsigned pos = 0; qp_opt_next(argc, argv, &pos, &o, &missing);) {
    daemonize |= qp_opt_is(&o, "daemonize");
    context |= qp_opt_is(&o, "object") && o.value != NULL &&
               strstr(o.value, "prealloc-context") != NULL;
  }
  return daemonize && context;
}

/* The mode from the config file for the VM of QEMU's ARGV, and in *QEMU
 * (when QEMU is not NULL) its qemu key (its group's, else [defaults]'s).
 * 0: not read exactly. */
static int
config_mode(const Settings *s, unsigned argc, char **argv, char **mode,
            char **qemu)
{
  const char *path = s->config ? s->config : QP_DEFAULT_CONFIG;
  QpVmNames names;
  if (!qp_vm_names_read(argc, argv, &names))
    return 0;
  QpFrontConfig c;
  int ok = qp_front_config_read(path, s->config != NULL, &names, &c);
  qp_vm_names_clear(&names);
  if (!ok)
    return 0;
  *mode = c.mode;
  if (qemu != NULL)
    *qemu = c.qemu;
  else
    free(c.qemu);
  return 1;
}

/* The real QEMU of a drop-in (ARGV0): QEMU_PIN_QEMU, the config's qemu
 * (the VM's group's, else [defaults]'s), or the next one on PATH. */
static int
drop_in_binary(char **envp, const char *argv0, char *config_qemu,
               QpFrontExec *out)
{
  const char *env = qp_front_getenv(envp, "QEMU_PIN_QEMU");
  const char *given = env ? env : config_qemu;
  if (given != NULL && *given == '\0')
    return 0;
  if (given != NULL) {
    out->found = strdup(given);
  } else {
    int no_self;
    out->found =
        qp_front_find_qemu(argv0, qp_front_getenv(envp, "PATH"), &no_self);
  }
  out->binary = out->found;
  return out->found != NULL;
}

int
qp_front_decide(int argc, char **argv, char **envp, QpFrontExec *out)
{
  *out = (QpFrontExec){0};
  if (argc < 1)
    return 0;
  Settings s = {0};
  char *base = qp_front_basename(argv[0]);
  int drop_in = base != NULL && qp_is_qemu_name(base);
  free(base);
  if (!drop_in && !read_cli(argc, argv, &s))
    return 0;
  unsigned first = drop_in ? 1 : s.qemu + 1; /* QEMU's first argument */
  unsigned qargc = (unsigned)argc - first;
  char **qargv = argv + first;
  if (s.config == NULL)
    s.config = qp_front_getenv(envp, "QEMU_PIN_CONFIG");
  if (s.mode == NULL)
    s.mode = qp_front_getenv(envp, "QEMU_PIN_MODE");
  if ((s.config != NULL && *s.config == '\0') || daemonize_edit(qargc, qargv))
    return 0;

  int passthrough = qp_qemu_argv_passthrough(qargc, qargv);
  /* --dry-run prints the plan of mode none; QEMU's help runs anyway. */
  if (!passthrough && qp_front_getenv(envp, "QEMU_PIN_DRY_RUN") != NULL)
    return 0;
  /* The config is read when it decides the mode, or names a drop-in's QEMU
   * (QEMU_PIN_QEMU names it first). */
  char *mode = NULL, *qemu = NULL;
  int want_qemu = drop_in && qp_front_getenv(envp, "QEMU_PIN_QEMU") == NULL;
  int ok = 1;
  if ((!passthrough && s.mode == NULL) || want_qemu)
    ok = config_mode(&s, qargc, qargv, &mode, want_qemu ? &qemu : NULL);
  const char *decided = s.mode ? s.mode : mode;
  ok = ok && (passthrough || (decided != NULL && strcmp(decided, "none") == 0));
  if (ok && drop_in)
    ok = drop_in_binary(envp, argv[0], qemu, out);
  else if (ok)
    out->binary = argv[s.qemu];
  free(mode);
  free(qemu);
  if (ok)
    out->argv = calloc(qargc + 2, sizeof(char *));
  if (!ok || out->argv == NULL) {
    qp_front_exec_clear(out);
    return 0;
  }
  out->argv[0] = drop_in ? argv[0] : argv[s.qemu];
  memcpy(out->argv + 1, qargv, qargc * sizeof(char *));
  return 1;
}

void
qp_front_exec_clear(QpFrontExec *e)
{
  free(e->found);
  free(e->argv);
  *e = (QpFrontExec){0};
}

int
qp_front_is_command(const char *arg)
{
  static const char *const commands[] = {"topology", "status",    "plan",
                                         "move",     "rebalance", "--help",
                                         "-h",       "--version"};
  for (size_t i = 0; arg != NULL && i < sizeof(commands) / sizeof(*commands);
       i++)
    if (strcmp(arg, commands[i]) == 0)
      return 1;
  return 0;
}
