/* The command line edge: which of qemu-pin's faces was invoked (drop-in
 * QEMU binary, launcher, plan, topology, status) and the exit status. */
#pragma once

#include <glib.h>
#include <time.h>

G_BEGIN_DECLS

/* The full program; T0 the front's start (CLOCK_MONOTONIC), or NULL. */
int qp_main(int argc, char **argv, const struct timespec *t0);

G_END_DECLS
