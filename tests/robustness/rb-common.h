/* Shared by the robustness tables: a per-test directory whose name marks
 * every process a row starts, and the checks every row ends with. */
#pragma once

#include <glib.h>

#include "tests/common/qp-test.h"

G_BEGIN_DECLS

typedef struct {
  char *dir;    /* per-test directory; its name is the marker */
  char *marker; /* basename of dir: in the argv of QEMU and of the keeper */
  char *state;  /* ledger directory */
  char *halt_fw;
  char *ran;  /* the QEMU wrapper touches this file when it runs */
  char *qemu; /* wrapper script: touch ran, exec real QEMU */
} RbFixture;

void rb_setup(RbFixture *f, gconstpointer data);
void rb_teardown(RbFixture *f, gconstpointer data);

/* Path of fake-qemu in the build tree. */
char *rb_fake_qemu(void);

/* Runs ARGV with ENVP (NULL: inherit) to its end, stdout and stderr to files
 * in F's directory, and returns its status (128 + signal if killed); fails
 * the test if it takes longer than TIMEOUT_MS. Then waits (up to 10 s) until
 * no process has the marker in its command line, so that a keeper's last
 * line is in the file too, and returns stderr's text in *ERR. */
int rb_run(RbFixture *f, char **argv, char **envp, guint timeout_ms,
           char **err);

/* Appends the real QEMU arguments of a guest that sits halted under TCG
 * (F's halting firmware, no devices, no display) to ARGV. */
void rb_add_guest_args(RbFixture *f, GPtrArray *argv);

/* Asserts TEXT is exactly one line ending in '\n'. */
void rb_assert_one_line(const char *text);

/* Names of the entries of the state directory other than its lock file and
 * a qemu.pid a test put there
 * (records, temporary files, .corrupt files): NULL-terminated. */
char **rb_state_entries(RbFixture *f);

/* Asserts that nothing is left: no state entry, no process with the marker
 * in its command line (QEMU, the keeper) within TIMEOUT_MS, and no process
 * named qemu-pin-keeper with the marker. */
void rb_assert_nothing_left(RbFixture *f, guint timeout_ms);

/* PIDs of processes whose comm is COMM and whose command line has MARKER. */
GArray *rb_pids_named(const char *comm, const char *marker);

G_END_DECLS
