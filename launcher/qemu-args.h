/* QEMU's command line as qemu-pin needs it: parsed for placement (both the
 * key=value syntax, with ",," escapes and implied first keys, and JSON), and
 * rewritten for launch. Everything qemu-pin does not need passes through
 * untouched and in order. */
#pragma once

#include <glib.h>
#include <hwloc.h>

#include "qp-error.h"
#include "topology/plan.h"

G_BEGIN_DECLS

/* A memory backend the caller made with -object memory-backend-*. */
typedef struct {
  char *id;
  char *qom_type; /* memory-backend-ram|file|memfd */
  guint64 size_mib;
  gboolean prealloc;
  gboolean hugetlb;
  guint64 hugetlbsize_kib;   /* 0 if unset */
  char *mem_path;            /* memory-backend-file */
  hwloc_bitmap_t host_nodes; /* NULL if unset */
  QpPolicy policy;           /* DEFAULT if unset */
  guint argi;                /* index in argv of the option's value,
                                G_MAXUINT when read from a -readconfig file */
  gboolean json;             /* given as JSON */
  /* Added by the argv area: */
  guint64 size_bytes;        /* exact size, 0 if unset (file backends) */
  gboolean prealloc_context; /* the caller set prealloc-context */
  /* Filled in by the memory model (qemu-memory.c): */
  guint64 page_kib; /* 0: ordinary memory, else its hugepage size */
  gboolean reserve; /* hugetlb pages reserved at start (reserve=, on) */
  gboolean dax;     /* device DAX or a file on a DAX filesystem: not RAM */
} QpBackend;

typedef struct {
  char **argv; /* the caller's QEMU arguments (without the binary) */
  guint argc;
  /* Not a launch (help, version, capability probe): exec straight through. */
  gboolean passthrough;
  QpRequest *req;       /* what placement needs */
  GPtrArray *backends;  /* of QpBackend */
  char *machine_memdev; /* -machine memory-backend= */
  gboolean has_S;       /* caller passed -S */
  char *incoming;       /* -incoming value, or NULL */
  gboolean daemonize;
  char *pidfile;
  char *name; /* -name (plain or guest=) */
  char *uuid;
  char *id; /* Proxmox's -id */
  gboolean has_sandbox;
  /* Added by the argv area (see qemu-args.c): */
  char *machine;       /* machine type as given ("pc" when none) */
  guint64 ram_bytes;   /* initial RAM in bytes (req->mem_mib rounded up) */
  GPtrArray *warnings; /* of char*: what qemu-pin cannot model (a warning) */
  GPtrArray *notes;    /* of char*: what QEMU warns about itself (for -v) */
  struct _QpQemuArgsPriv *priv; /* parser state the rewrite needs */
} QpQemuArgs;

/* What names the VM in qemu-pin's config file ([name:VM], [uuid:UUID],
 * [id:N]): -name (plain or guest=), -uuid and Proxmox's -id, NULL when not
 * given. */
typedef struct {
  char *name;
  char *uuid;
  char *id;
} QpVmIds;

/* Reads only the VM's names from ARGV (the binary excluded), with no check
 * that can fail: mode none, which can come from the VM's config group, must
 * run QEMU whatever else the command line holds. */
QpVmIds *qp_vm_ids_from_argv(guint argc, char **argv);
void qp_vm_ids_free(QpVmIds *ids);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QpVmIds, qp_vm_ids_free)

/* With -daemonize, QEMU creates a thread-context's thread before its fork:
 * the daemon has the object but not the thread, and a backend that
 * preallocates through it waits forever. ARGV (ARGC entries) with
 * prealloc-context taken off every memory backend of -object (key=value or
 * JSON), the ids of those in *DROPPED ("m0, m1"); NULL when -daemonize is not
 * given or no backend names one. Never fails, for every mode, none included:
 * a value it cannot read stays as written. */
char **qp_argv_daemonize_safe(guint argc, char **argv, char **dropped);

/* Parses ARGV (ARGC entries, the binary excluded). A malformed value in an
 * option qemu-pin must understand fails with a one-line message naming the
 * option, the value and what was expected. */
QpQemuArgs *qp_qemu_args_parse(guint argc, char **argv, GError **error);
void qp_qemu_args_free(QpQemuArgs *args);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QpQemuArgs, qp_qemu_args_free)

/* The argv to exec (ARGV0 first, NULL-terminated): the caller's arguments
 * with -S added, the private monitor on QMP_FD
 * (-chardev socket,id=qemu-pin-qmp,fd=N -mon
 * chardev=qemu-pin-qmp,mode=control), memory backends given host-nodes/policy
 * where the caller set none, backends created where there are none, and
 * thread-context objects for preallocating backends (none with -daemonize:
 * see qp_qemu_args_prealloc_note). PLAN may be NULL (mode none: only -S and
 * the monitor). A negative QMP_FD leaves the monitor out (for printing the
 * argv). */
char **qp_qemu_args_rewrite(const QpQemuArgs *args, const char *argv0,
                            const QpPlan *plan, int qmp_fd, GError **error);

/* With -daemonize QEMU cannot use a thread-context of its command line (its
 * thread does not survive the fork; preallocating through it never ends), so
 * the rewrite adds none (the caller's are taken off before parsing:
 * qp_argv_daemonize_safe). One line saying so, for -v, when that leaves
 * bound memory to preallocate without one; else NULL. */
char *qp_qemu_args_prealloc_note(const QpQemuArgs *args, const QpPlan *plan);

/* "4G", "512M", "1024" (MiB by default, as -m does) to MiB, rounded up to a
 * whole MiB. */
gboolean qp_parse_size_mib(const char *text, const char *what,
                           gboolean default_mib, guint64 *out, GError **error);

/* The same in bytes, with QEMU 7.2's qemu_strtosz rules: suffixes B K M G T
 * P E (either case), a fraction only with a suffix, "0x" hex. Without a
 * suffix the unit is MiB if DEFAULT_MIB, else bytes. */
gboolean qp_parse_size(const char *text, const char *what, gboolean default_mib,
                       guint64 *out, GError **error);

/* Id of the backend the rewrite creates for a guest without vNUMA on machine
 * MACHINE: QEMU's default RAM id ("pc.ram" for pc and q35, so that the RAM
 * block keeps its name and migration works both ways), else "qemu-pin-ram". */
const char *qp_qemu_args_ram_id(const QpQemuArgs *args);

G_END_DECLS
