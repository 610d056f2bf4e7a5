/* Test helpers that need qemu-pin's QEMU command line parser (link the
 * launcher library with them). */
#pragma once

#include "launcher/qemu/args.h"

G_BEGIN_DECLS

/* ARGV (NULL-terminated QEMU arguments) parsed; the test fails on a
 * refusal. */
QpQemuArgs *qp_test_parse_ok(const char *const *argv);

G_END_DECLS
