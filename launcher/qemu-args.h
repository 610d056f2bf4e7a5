/* QEMU's command line as qemu-pin needs it: parsed for placement (both the
 * key=value syntax, with ",," escapes and implied first keys, and JSON), and
 * rewritten for launch. Everything qemu-pin does not need passes through
 * untouched and in order. */
#pragma once

#include <glib.h>
#include <hwloc.h>

#include "topology/plan.h"

G_BEGIN_DECLS

#define QP_ARGS_ERROR (qp_args_error_quark())
GQuark qp_args_error_quark(void);

typedef enum {
  QP_ARGS_ERROR_INVALID, /* a malformed value in an option we must read */
} QpArgsError;

/* A memory backend the caller made with -object memory-backend-*. */
typedef struct {
  char *id;
  char *qom_type;            /* memory-backend-ram|file|memfd */
  guint64 size_mib;
  gboolean prealloc;
  gboolean hugetlb;
  guint64 hugetlbsize_kib;   /* 0 if unset */
  char *mem_path;            /* memory-backend-file */
  hwloc_bitmap_t host_nodes; /* NULL if unset */
  QpPolicy policy;           /* DEFAULT if unset */
  guint argi;                /* index in argv of the option's value */
  gboolean json;             /* given as JSON */
} QpBackend;

typedef struct {
  char **argv;          /* the caller's QEMU arguments (without the binary) */
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
  char *name;           /* -name (plain or guest=) */
  char *uuid;
  char *id;             /* Proxmox's -id */
  gboolean has_sandbox;
} QpQemuArgs;

/* Parses ARGV (ARGC entries, the binary excluded). A malformed value in an
 * option qemu-pin must understand fails with a one-line message naming the
 * option, the value and what was expected. */
QpQemuArgs *qp_qemu_args_parse(guint argc, char **argv, GError **error);
void qp_qemu_args_free(QpQemuArgs *args);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QpQemuArgs, qp_qemu_args_free)

/* The argv to exec (ARGV0 first, NULL-terminated): the caller's arguments
 * with -S added, the private monitor on QMP_FD
 * (-chardev socket,id=qemu-pin-qmp,fd=N -mon chardev=qemu-pin-qmp,mode=control),
 * memory backends given host-nodes/policy where the caller set none, backends
 * created where there are none, and thread-context objects for preallocating
 * backends. PLAN may be NULL (mode none: only -S and the monitor). */
char **qp_qemu_args_rewrite(const QpQemuArgs *args, const char *argv0,
                            const QpPlan *plan, int qmp_fd, GError **error);

/* "4G", "512M", "1024" (MiB by default, as -m does) to MiB. */
gboolean qp_parse_size_mib(const char *text, const char *what,
                           gboolean default_mib, guint64 *out, GError **error);

G_END_DECLS
