/* Shared helpers for tests that run the real qemu-pin and real QEMU. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

typedef enum {
  QP_TEST_FW_EXIT,  /* outb 0 to port 0xf4: QEMU exits with status 1 */
  QP_TEST_FW_HALT,  /* cli; hlt; jmp: the guest sleeps until killed */
  QP_TEST_FW_EXIT3, /* outb 1 to port 0xf4: QEMU exits with status 3, which
                     * no refusal shares: a launch a test expects refused
                     * that runs after all ends at once, and is told apart */
} QpTestFirmware;

/* The built qemu-pin (QP_BINARY). */
const char *qp_test_binary(void);

/* A fresh directory under /tmp, removed with qp_test_rmtree(). */
char *qp_test_tmpdir(void);
void qp_test_rmtree(const char *dir);

/* Writes a 64 KiB firmware of KIND in DIR; returns its path. */
char *qp_test_firmware(const char *dir, QpTestFirmware kind);

typedef struct {
  int status; /* exit status, or 128 + signal */
  char *out;
  char *err;
} QpTestRun;

void qp_test_run_clear(QpTestRun *r);

/* Runs ARGV (ENVP NULL: inherit) to completion, collecting output. */
void qp_test_run(char **argv, char **envp, QpTestRun *r);

/* The PID a pidfile (QEMU's -pidfile) names: asserts it is there and
 * positive. */
int qp_test_pidfile(const char *path);

/* Runs ARGV, a -daemonize launch writing PIDFILE, which must exit 0 saying
 * nothing; the daemon's PID. */
int qp_test_launch_daemon(char **argv, const char *pidfile);

/* Starts ARGV in the background; stdout/stderr go to files in DIR. */
GPid qp_test_spawn(char **argv, char **envp, const char *dir);

/* Waits for PID (a child) to exit, up to TIMEOUT_MS; returns the exit
 * status (128 + signal when killed), or -1 on timeout. */
int qp_test_wait(GPid pid, guint timeout_ms);

/* Waits up to TIMEOUT_MS until process PID is in state WANT (the letter of
 * /proc/PID/status's State: 'T' stopped, 'S' sleeping...); FALSE if not. */
gboolean qp_test_wait_state(int pid, char want, guint timeout_ms);

/* A field of /proc/PID/task/TID/status ("Cpus_allowed_list"), trimmed. */
char *qp_test_task_field(int pid, int tid, const char *field);

/* Thread ids of the vCPUs of QEMU process PID, indexed by vCPU number
 * (threads named "CPU N/TCG", which needs -name ...,debug-threads=on). */
GArray *qp_test_vcpu_threads(int pid);

/* Waits until PID has N vCPU threads and each one's Cpus_allowed_list is
 * WANT[i] (NULL-terminated; "": no vCPU of index i runs); TRUE if so
 * within TIMEOUT_MS. */
gboolean qp_test_wait_vcpu_affinity(int pid, const char *const *want,
                                    guint timeout_ms);

/* The numa_maps policies ("bind:0", "default", ...) of every mapping of
 * exactly SIZE_KIB in PID, in address order (NULL-terminated, maybe empty). */
char **qp_test_policies_of_mappings(int pid, guint64 size_kib);

/* The same mappings' whole numa_maps lines, without the address
 * ("bind:0 anon=32768 dirty=32768 N0=32768 kernelpagesize_kB=4"). */
char **qp_test_numa_maps_of_mappings(int pid, guint64 size_kib);

/* The same, read until there are N such mappings (up to TIMEOUT_MS): a
 * thread's new malloc arena is briefly a mapping of 128 MiB too (glibc
 * reserves twice its 64 MiB, then trims). */
char **qp_test_wait_mappings(int pid, guint64 size_kib, guint n,
                             guint timeout_ms);

/* KiB of a numa_maps LINE that are in memory (its N<node>=<pages> items);
 * *ON_POLICY_NODES (when not NULL) says whether they are all on the nodes
 * of the line's policy ("bind:0-1"; any node for "default"). */
guint64 qp_test_numa_maps_resident_kib(const char *line,
                                       gboolean *on_policy_nodes);

/* PIDs of processes other than this one whose command line contains
 * MARKER. */
GArray *qp_test_pids_with(const char *marker);

/* Waits until no process has MARKER in its command line. */
gboolean qp_test_wait_no_process(const char *marker, guint timeout_ms);

/* Kills every process whose command line holds MARKER once this test
 * process ends, however it ends: a failed assertion aborts it before its
 * teardown could kill the QEMUs it started. A child of its own session
 * waits for a pipe to close. One guard at a time; qp_test_guard_stop()
 * ends it (killing what is left then). */
void qp_test_guard_start(const char *marker);
void qp_test_guard_stop(void);

/* Number of lines (newlines) in TEXT. */
guint qp_test_count_lines(const char *text);

/* Number of ledger records (*.json) in DIR. */
guint qp_test_count_records(const char *dir);

/* The one ledger record in DIR (NULL if there is not exactly one). */
JsonObject *qp_test_record(const char *dir);

/* Waits until the one ledger record in DIR has the string member MEMBER
 * ("dedicated-cpus") equal to WANT; says what it was when not. */
gboolean qp_test_wait_record_string(const char *dir, const char *member,
                                    const char *want, guint timeout_ms);

/* Sets the CPU affinity of thread TID to the CPU list LIST ("0-1"), as an
 * orchestrator (taskset -p, virsh vcpupin) does. */
void qp_test_set_affinity(int tid, const char *list);

/* The CPU list LIST less the host core (every SMT sibling, from sysfs)
 * holding CPU, as a list. */
char *qp_test_cpus_without_core_of(const char *list, const char *cpu);

/* Runs `qemu-pin plan --state-dir=DIR [EXTRA...] -- QEMU ARGS` and returns
 * the parsed plan. */
JsonObject *qp_test_plan(char **qemu_pin_and_qemu_args);

/* The vCPU CPU sets of a plan as a NULL-terminated array of list strings. */
char **qp_test_plan_vcpu_sets(JsonObject *plan);

/* A stream socket connected to the unix socket PATH, or -1 (errno set). */
int qp_test_connect_unix(const char *path);

/* Sends one QMP command over the unix socket PATH (after the capabilities
 * handshake) and returns the "return" member, or NULL. */
JsonNode *qp_test_qmp_command(const char *path, const char *command);

/* The same with ARGUMENTS, a JSON object (NULL: none). */
JsonNode *qp_test_qmp_execute(const char *path, const char *command,
                              const char *arguments);

/* The text of file NAME in DIR ("" when it cannot be read). */
char *qp_test_file_text(const char *dir, const char *name);

/* The number in the file PATH (sysfs, procfs), or -1 when it cannot be
 * read. */
gint64 qp_test_read_number(const char *path);

/* Writes N to the file PATH in place (in sysfs, g_file_set_contents()
 * would rename a new file over it): FALSE, with a test message, when it
 * cannot. */
gboolean qp_test_write_number(const char *path, gint64 n);

/* SIGTERM to a VM's QEMU (PID): it exits, nothing of MARKER is left, and
 * the ledger STATE holds no record. */
void qp_test_stop_released(GPid pid, const char *marker, const char *state);

/* "status" of query-status over the unix socket PATH, or NULL. */
char *qp_test_query_status(const char *path);

/* Waits until query-status over PATH says WANT ("running", ...). */
gboolean qp_test_wait_status(const char *path, const char *want,
                             guint timeout_ms);

/* Path of the real QEMU for tests. */
const char *qp_test_qemu(void);

/* What the real QEMU makes of a command line, asked over QMP. */
typedef struct {
  gboolean started;  /* QEMU reached its main loop (it accepts the line) */
  int status;        /* exit status */
  char *err;         /* its stderr */
  guint64 ram_mib;   /* query-memory-size-summary: base-memory */
  guint vcpus;       /* query-cpus-fast: vCPUs at boot */
  char *boot;        /* query-cpus-fast: their cpu-indexes ("0-1,3") */
  guint maxcpus;     /* query-hotpluggable-cpus: possible vCPUs */
  int *cpu_node;     /* per possible vCPU index: its guest node, -1 none */
  int *cpu_die;      /* per possible vCPU index: socket-id * dies + die-id */
  guint n_nodes;     /* "info numa": guest NUMA nodes (0 without -numa) */
  guint64 *node_mib; /* "info numa": size of each node */
} QpTestQemuView;

/* Runs QEMU (qp_test_qemu(), TCG, no display, no default devices, paused)
 * with ARGS (NULL-terminated) and a QMP monitor on its stdin that asks
 * what it made of them and quits. A refused line leaves started FALSE. */
void qp_test_qemu_view(const char *const *args, QpTestQemuView *view);
void qp_test_qemu_view_clear(QpTestQemuView *view);

G_END_DECLS
