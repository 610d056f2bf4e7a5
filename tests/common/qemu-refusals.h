/* The command lines qemu-pin refuses because QEMU 7.2 refuses them too, each
 * with QEMU's own message and the words of qemu-pin's one line. The table is
 * checked by tests/args/test-refusals.c against the real QEMU; the corpus
 * test (tests/corpus) accepts a refusal only if it is "does not fit" or one
 * of these. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  const char *name;      /* test path under /refusals/ */
  const char *args[24];  /* QEMU arguments, NULL-terminated; @DATA@ is
                            tests/data */
  const char *qemu_says; /* in QEMU 7.2's stderr */
  const char *we_say;    /* in qemu-pin's line */
  gboolean pattern;      /* we_say is a pattern of the whole line
                            (g_pattern_match_simple: '*' and '?') */
  int qemu_signal;       /* the signal QEMU 7.2 dies of instead (0: none) */
} QpQemuRefusal;

extern const QpQemuRefusal qp_qemu_refusals[];
extern const gsize qp_n_qemu_refusals;

/* The row's arguments with @DATA@ (a file of this folder's data) made the
 * path of tests/data (under G_TEST_SRCDIR). */
char **qp_qemu_refusal_args(const QpQemuRefusal *row);

/* TRUE if qemu-pin's MESSAGE is ROW's refusal. */
gboolean qp_qemu_refusal_matches(const QpQemuRefusal *row, const char *message);

/* The row whose refusal MESSAGE is, or NULL. */
const QpQemuRefusal *qp_qemu_refusal_find(const char *message);

G_END_DECLS
