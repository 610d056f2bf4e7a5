/* QEMU's command line as qemu-pin needs it: parsed for placement (both the
 * key=value syntax, with ",," escapes and implied first keys, and JSON), and
 * rewritten for launch. Everything qemu-pin does not need passes through
 * untouched and in order. */
#pragma once

#include <glib.h>
#include <hwloc.h>

#include "launcher/qemu/error.h"
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

/* Parses ARGV (ARGC entries, the binary excluded). A malformed value in an
 * option qemu-pin must understand fails with a one-line message naming the
 * option, the value and what was expected. */
QpQemuArgs *qp_qemu_args_parse(guint argc, char **argv, GError **error);
void qp_qemu_args_free(QpQemuArgs *args);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QpQemuArgs, qp_qemu_args_free)

/* Id of the backend the rewrite creates for a guest without vNUMA on machine
 * MACHINE: QEMU's default RAM id ("pc.ram" for pc and q35, so that the RAM
 * block keeps its name and migration works both ways), else "qemu-pin-ram". */
const char *qp_qemu_args_ram_id(const QpQemuArgs *args);

G_END_DECLS
