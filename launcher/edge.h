/* The command line edge shared by both modules (launcher/hand-over.h):
 * QEMU's command line read, the mode and the settings resolved, and the
 * launch; what a module does not do itself goes through its QpEdge. The
 * only place that says an error and chooses the exit status
 * (qp_error_exit_status()). */
#pragma once

#include <glib.h>
#include <time.h>

#include "launcher/options.h"
#include "launcher/launch.h"
#include "launcher/qemu/args.h"

G_BEGIN_DECLS

typedef struct {
  /* `plan` and --dry-run: the plan of ARGS printed (ARGS NULL: mode
   * none, QEMU's command line not read). */
  int (*plan)(const QpOptions *opts, const QpQemuArgs *args, gboolean plan_only,
              GError **error);
  /* qemu-pin's command line ARGV (not a drop-in's): its command
   * (qp_front_is_command()) or a launch (qp_edge_qemu_command()). */
  int (*command)(QpOptions *opts, int argc, char **argv, GError **error);
  /* --make-room before a launch's claim (qp_launch()); NULL: a launch that
   * asks for it is handed over to the full module (it moves other VMs
   * through their keepers, which takes json-glib). */
  QpMakeRoom make_room;
} QpEdge;

/* A module's main: T0 the front's start (CLOCK_MONOTONIC), or NULL. */
int qp_edge_main(int argc, char **argv, const struct timespec *t0,
                 const QpEdge *edge);

/* qemu-pin [OPTIONS] [--] QEMU_BINARY ARGS..., or with SHIFT 1 `plan
 * [OPTIONS] [--] QEMU_BINARY ARGS...` (ARGV[1] "plan"). */
int qp_edge_qemu_command(const QpEdge *edge, QpOptions *opts, int argc,
                         char **argv, int shift, GError **error);

/* The settings for QEMU's command line *ARGV (ARGC words, the binary
 * excluded), as a launch and `plan` take them: -daemonize's
 * prealloc-contexts taken off it (*ARGV then points into *SAFE, the
 * caller's to free; *DROPPED their backends' ids, or NULL), then the
 * environment and the config for that VM read into OPTS, and logging set
 * up for it. */
gboolean qp_edge_settings(QpOptions *opts, int argc, char ***argv, char ***safe,
                          char **dropped, GError **error);

/* The real QEMU binary for a drop-in invoked as ARGV0 (see
 * qp_front_find_qemu()), or NULL with the error. */
char *qp_find_real_qemu(const char *argv0, GError **error);

G_END_DECLS
