/* The way from the launch path (the launcher: launch-main.h) to the full
 * program (qemu-pin-full: json-glib, GObject, GIO and libnuma besides
 * glib and hwloc), which runs every command (docs/design.md, "The
 * front"). */
#pragma once

#include <glib.h>
#include <time.h>

G_BEGIN_DECLS

/* The command line the launcher was started with, for a hand-over. */
void qp_hand_over_init(int argc, char **argv, const struct timespec *t0);

/* The whole run handed to the full program: it is exec'd with the command
 * line qp_hand_over_init() saw (the same process, the same PID), and this
 * returns only with -1 and the error when it cannot be. For what the
 * launch path does not do itself (qemu-pin's commands, plans, and any
 * launch that needs the full program). Nothing may be claimed before. */
int qp_hand_over(GError **error);

G_END_DECLS
