/* Helpers shared by the orchestrator tests (libvirt, Proxmox-style,
 * migration, hotplug): drop-in links, config files, QMP with arguments,
 * ledger records, vCPU affinities. Built on tests/common/qp-test.h. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "tests/common/qp-test.h"

G_BEGIN_DECLS

/* A symlink DIR/bin/NAME -> the built qemu-pin (qemu-pin installed under a
 * QEMU binary's name); returns its path. */
char *orch_dropin(const char *dir, const char *name);

/* Writes TEXT to DIR/NAME; returns the path. */
char *orch_write(const char *dir, const char *name, const char *text);

/* This process's environment without any QEMU_PIN_* variable, plus the
 * NULL-terminated KEY=VALUE pairs in EXTRA. */
char **orch_env(const char *const *extra);

/* Sends COMMAND (a whole QMP command object as JSON text) over the unix
 * socket PATH after the capabilities handshake. Returns the "return" member,
 * or NULL with *ERROR_TEXT (may be NULL) set to the error's description. */
JsonNode *orch_qmp(const char *path, const char *command, char **error_text);

/* "status" of query-status over PATH, or NULL. */
char *orch_status(const char *path);

/* Waits until query-status over PATH says WANT. */
gboolean orch_wait_status(const char *path, const char *want, guint timeout_ms);

/* Waits (up to 120 s) until query-migrate over the source's SRC_QMP says
 * the migration ended, and asserts it completed. */
void orch_wait_migrated(const char *src_qmp);

/* The one ledger record in DIR (NULL if there is not exactly one). */
JsonObject *orch_record(const char *dir);

/* Waits until DIR holds N records. */
gboolean orch_wait_records(const char *dir, guint n, guint timeout_ms);

/* Cpus_allowed_list of each vCPU thread of PID, by vCPU index
 * (NULL-terminated; an entry is "" when that vCPU's thread is missing). */
char **orch_vcpu_affinities(int pid);

/* Sets the CPU affinity of every vCPU thread of PID to CPUS (a list such as
 * "0-1"), as an orchestrator does after start. */
void orch_set_vcpu_affinities(int pid, const char *cpus);

/* The CPUs this process may run on, as a list ("0-1"). */
char *orch_own_cpus(void);

/* Union of the CPU lists in SETS, as a list. */
char *orch_union(char **sets);

/* Field 22 of /proc/PID/stat (start time), 0 when PID is gone. */
guint64 orch_start_time(int pid);

/* NUL-separated /proc/PID/cmdline as a NULL-terminated vector. */
char **orch_cmdline(int pid);

/* A TCP port on 127.0.0.1 that was free a moment ago. */
int orch_free_port(void);

/* If this test process aborts (a failed assertion) or is terminated (a
 * timeout), first destroy and undefine the libvirt domain DOMAIN with VIRSH
 * (both may be NULL) and kill every process with MARKER in its command
 * line, so that a failed test leaves no VM behind. One test at a time;
 * orch_cleanup_on_abort(NULL, NULL, NULL) disarms it. */
void orch_cleanup_on_abort(const char *marker, const char *virsh,
                           const char *domain);

/* A message with the contents of FILE, if it exists (for failures). */
void orch_show_file(const char *what, const char *file);

G_END_DECLS
