/* What qemu-pin says: one line each, to stderr ("qemu-pin: ..."), or to the
 * journal with structured fields when stderr is the journal (a systemd
 * unit). Info lines (the keeper's steps and timings) need -v. */
#pragma once

#include <glib.h>
#include <time.h>

G_BEGIN_DECLS

void qp_log_init(int verbose);

/* The VM the following lines are about (the journal's QEMU_PIN_VM). */
void qp_log_set_vm(const char *name);

void qp_log(GLogLevelFlags level, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

/* With QEMU_PIN_TIMING=1 in the environment: "qemu-pin: timing: STEP
 * MS" on stderr, the milliseconds since T0 (CLOCK_MONOTONIC: the front's
 * main(); NULL: now), which bench/ reads to tell where the time before
 * exec goes. Off, it costs one branch. */
void qp_timing_start(const struct timespec *t0);
void qp_timing(const char *step);

/* A command's answer on stdout, as its bytes: JSON and text are UTF-8,
 * which g_print() would convert to the charset of a locale qemu-pin never
 * sets (ASCII: "vm\u00e9" printed as "vm?"). */
void qp_print(const char *fmt, ...) G_GNUC_PRINTF(1, 2);

#define qp_error(...) qp_log(G_LOG_LEVEL_CRITICAL, __VA_ARGS__)
#define qp_warning(...) qp_log(G_LOG_LEVEL_WARNING, __VA_ARGS__)
#define qp_info(...) qp_log(G_LOG_LEVEL_INFO, __VA_ARGS__)

G_END_DECLS
