/* The two modules of qemu-pin (docs/design.md, "The front"): the launch
 * module (qemu-pin-launch.so: glib, hwloc) runs a launch and its
 * keeper; the full module (qemu-pin-full.so: json-glib, GObject, GIO
 * besides) runs every command. This is the way from the first to the
 * second. */
#pragma once

#include <glib.h>
#include <time.h>

G_BEGIN_DECLS

#define QP_FULL_MODULE "qemu-pin-full.so"

/* The command line the module was entered with, for a hand-over. */
void qp_hand_over_init(int argc, char **argv, const struct timespec *t0);

/* The whole run handed to the full module: its qp_module_main() with the
 * command line qp_hand_over_init() saw; its exit status, or -1 with the
 * error when it cannot be loaded. For what the launch module does not do
 * itself (qemu-pin's commands, plans, and any launch that needs the full
 * program). */
int qp_hand_over(GError **error);

G_END_DECLS
