/* The front: what qemu-pin decides before it loads anything but the C
 * library. Mode none and every pass-through (help, version, capability
 * probes) exec QEMU from here, untouched: the caller's argv[0], the same
 * environment, the same descriptors. Everything else goes to the full
 * program (launcher/commands.c), which starts with the same decision, so
 * that both always agree (docs/design.md, "The front").
 *
 * What decides, in order: a pass-through on QEMU's command line; else the
 * mode: qemu-pin's --mode, else QEMU_PIN_MODE, else the config file's mode
 * for this VM (its last [name:VM], [uuid:UUID] or [id:N] group that has
 * one, else [defaults]). Nothing else of the settings is read for them.
 * Whatever the front cannot read exactly as the full program does (an
 * option it does not know, a config line outside its plain subset, a
 * -daemonize line whose prealloc-context the full program takes off) goes
 * to the full program. */
#pragma once

#include "launcher/front/qemu-argv.h"

#define QP_DEFAULT_CONFIG "/etc/qemu-pin/qemu-pin.conf"

/* One word of qemu-pin's own command line (qemu-pin [OPTIONS] [--] QEMU). */
typedef enum {
  QP_CLI_END,     /* QEMU's binary is at *I (past a "--"), or there is none */
  QP_CLI_VERBOSE, /* -v, -vv, --verbose: VERBOSE more */
  QP_CLI_LONG,    /* --NAME or --NAME=VALUE */
  QP_CLI_BAD,     /* a short option qemu-pin does not have */
} QpCliKind;

typedef struct {
  QpCliKind kind;
  int verbose;
  const char *name; /* NAME_LEN bytes, after the dashes */
  size_t name_len;
  const char *eq; /* the '=' of --NAME=VALUE, or NULL */
} QpCliWord;

/* Reads ARGV[*I] into W; at QP_CLI_END, *I moves past a "--". */
void qp_cli_word(int argc, char **argv, int *i, QpCliWord *w);

/* QEMU to run as the caller asked. */
typedef struct {
  const char *binary; /* a path, or a name to look up on PATH */
  char *found;        /* the binary when the front found it (malloc()) */
  char **argv;        /* argv[0] the caller's, then QEMU's arguments */
} QpFrontExec;

/* Whether ARGV (qemu-pin's own, ARGV[0] included) runs QEMU straight
 * under the environment ENVP: then OUT says how. 0: the full program
 * decides (a launch, a plan, a command, an error, or what the front
 * cannot read exactly). */
int qp_front_decide(int argc, char **argv, char **envp, QpFrontExec *out);
void qp_front_exec_clear(QpFrontExec *e);

/* The value of NAME in ENVP, or NULL. */
const char *qp_front_getenv(char **envp, const char *name);

/* TRUE if NAME (a basename) is one a QEMU binary goes by: qemu-system-*,
 * kvm, qemu-kvm. */
int qp_is_qemu_name(const char *name);

/* TRUE if ARG, the first argument, names one of qemu-pin's own commands
 * (topology, status, plan, move, rebalance, --help, -h, --version): the
 * full module's work; anything else is a launch. */
int qp_front_is_command(const char *arg);

/* PATH's last component as GLib's g_path_get_basename() gives it: a string
 * of malloc(). */
char *qp_front_basename(const char *path);

/* The real QEMU binary for a drop-in invoked as ARGV0: the binary
 * dpkg-divert moved aside (ARGV0.distrib) when ARGV0 is qemu-pin, else the
 * next match for its basename on PATH_ENV (NULL: a default PATH) that is
 * not qemu-pin itself (device and inode compared with qp_front_self()),
 * or its .distrib. A string of malloc(), or NULL; *NO_SELF when
 * qp_front_self() cannot be read. */
char *qp_front_find_qemu(const char *argv0, const char *path_env, int *no_self);

/* qemu-pin's executable, the one the caller ran: /proc/self/exe, or what
 * the launcher told the full program it handed a run to (full-main.c). */
const char *qp_front_self(void);
void qp_front_set_self(const char *path);

/* The full program (launcher/full-main.c): qemu-pin's commands, plans,
 * and the launches the launcher hands over (launcher/hand-over.h). It is
 * an executable of its own, linked with the shared libraries it needs
 * (json-glib, GIO, libnuma besides glib and hwloc), next to qemu-pin in a
 * build tree, else in QP_MODULE_DIR: a string of malloc(), or NULL. */
char *qp_front_full_path(void);

/* The first argument the launcher gives the full program, then its own
 * path, then the caller's argv from ARGV[1] on (ARGV[0] stays first). */
#define QP_FULL_MARK "--qemu-pin-front"

/* Runs the full program with the caller's ARGC, ARGV: returns only if it
 * cannot be run, with errno set and *PATH (malloc(), or NULL) the program
 * tried. */
void qp_front_exec_full(int argc, char **argv, char **path);

/* The config file as far as the mode of a VM needs it. */
typedef struct {
  char *mode; /* for the VM: its last group with a mode, else [defaults]' */
  char *qemu; /* [defaults] qemu */
} QpFrontConfig;

/* Reads PATH (EXPLICIT: named by --config or QEMU_PIN_CONFIG, and so an
 * error when missing) for the VM NAMES. 1: read, OUT filled (nothing for a
 * default config that does not exist); 0: not read exactly as the full
 * program reads it (an error, or a line outside the plain subset: groups,
 * key = value without escapes or trailing blanks, # comments, blank lines,
 * ASCII, every group once). */
int qp_front_config_read(const char *path, int is_explicit,
                         const QpVmNames *names, QpFrontConfig *out);
void qp_front_config_clear(QpFrontConfig *c);
