/* Shared helpers for tests that run the real qemu-pin and real QEMU. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

typedef enum {
  QP_TEST_FW_EXIT, /* outb 0 to port 0xf4: QEMU exits with status 1 */
  QP_TEST_FW_HALT, /* cli; hlt; jmp: the guest sleeps until killed */
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

/* Starts ARGV in the background; stdout/stderr go to files in DIR. */
GPid qp_test_spawn(char **argv, char **envp, const char *dir);

/* Waits for PID (a child) to exit, up to TIMEOUT_MS; returns the exit
 * status (128 + signal when killed), or -1 on timeout. */
int qp_test_wait(GPid pid, guint timeout_ms);

/* A field of /proc/PID/task/TID/status ("Cpus_allowed_list"), trimmed. */
char *qp_test_task_field(int pid, int tid, const char *field);

/* Thread ids of the vCPUs of QEMU process PID, indexed by vCPU number
 * (threads named "CPU N/TCG", which needs -name ...,debug-threads=on). */
GArray *qp_test_vcpu_threads(int pid);

/* Waits until PID has N vCPU threads and each one's Cpus_allowed_list is
 * WANT[i] (NULL-terminated); TRUE if so within TIMEOUT_MS. */
gboolean qp_test_wait_vcpu_affinity(int pid, const char *const *want,
                                    guint timeout_ms);

/* The numa_maps policies ("bind:0", "default", ...) of every mapping of
 * exactly SIZE_KIB in PID, in address order (NULL-terminated, maybe empty). */
char **qp_test_policies_of_mappings(int pid, guint64 size_kib);

/* PIDs of processes other than this one whose command line contains
 * MARKER. */
GArray *qp_test_pids_with(const char *marker);

/* Waits until no process has MARKER in its command line. */
gboolean qp_test_wait_no_process(const char *marker, guint timeout_ms);

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

/* "status" of query-status over the unix socket PATH, or NULL. */
char *qp_test_query_status(const char *path);

/* Waits until query-status over PATH says WANT ("running", ...). */
gboolean qp_test_wait_status(const char *path, const char *want,
                             guint timeout_ms);

/* Path of the real QEMU for tests. */
const char *qp_test_qemu(void);

G_END_DECLS
