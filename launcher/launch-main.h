/* A launch, and its keeper: what the launcher runs itself once the front
 * has decided it is no pass-through (launcher/front/main.c). Linked
 * without json-glib (and so without GObject and GIO): qemu-pin's commands
 * and plans are the full program's, handed over whole (hand-over.h). */
#pragma once

#include <time.h>

/* The launch path's main (T0: when main() began), its exit status. */
int qp_launch_main(int argc, char **argv, const struct timespec *t0);
