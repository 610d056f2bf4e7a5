/* QEMU's command line as qemu-pin reads it for placement: what QEMU will
 * make of it (the vCPUs, the memory and where the caller bound it, the
 * devices passed through) and where in argv each part was written, so that
 * the rewrite (rewrite.h) can bind it. Everything qemu-pin does not need
 * passes through untouched and in order. */
#pragma once

#include <glib.h>
#include <hwloc.h>

#include "launcher/qemu/error.h"
#include "launcher/qemu/machine.h"
#include "launcher/qemu/option-table.h"
#include "topology/plan/plan.h"

G_BEGIN_DECLS

/* A memory backend the caller made with -object memory-backend-*. */
/* linux/memfd.h's MFD_HUGE_SHIFT: where memfd_create() takes a page size. */
#define QP_MFD_HUGE_SHIFT 26

typedef struct {
  char *id;
  char *qom_type; /* memory-backend-ram|file|memfd|epc */
  guint argi;     /* argv index of the -object value, or QP_ARGI_IN_FILE */
  gboolean json;  /* written as JSON */
  /* What the caller set. */
  guint64 size_bytes;        /* size=; 0 if unset (a file backend's file) */
  guint64 size_mib;          /* size_bytes rounded up to a whole MiB */
  gboolean prealloc;         /* prealloc=, or -mem-prealloc */
  gboolean prealloc_context; /* prealloc-context= is set */
  gboolean hugetlb;
  guint64 hugetlbsize_kib; /* 0 if unset */
  /* memory-backend-memfd with hugetlb=on: the flags QEMU 7.2 gives
   * memfd_create() (MFD_HUGETLB, log2 of hugetlbsize= from bit
   * QP_MFD_HUGE_SHIFT, 0 there without it, ...); 0 otherwise. */
  guint memfd_flags;
  char *mem_path;            /* memory-backend-file */
  gboolean readonly;         /* memory-backend-file readonly=on */
  hwloc_bitmap_t host_nodes; /* NULL if unset */
  QpPolicy policy;           /* DEFAULT if unset */
  /* What the host makes of it (qp_backend_classify). */
  guint64 page_kib; /* 0: ordinary memory, else its hugepage size */
  gboolean reserve; /* hugetlb pages reserved at start (reserve=, on) */
  gboolean dax;     /* device DAX or a file on a DAX filesystem: not RAM */
} QpBackend;

/* A -numa node as the command line gives it (parallel to req->gnodes):
 * where the rewrite gives it a backend of its own. */
typedef struct {
  guint argi;          /* argv index of its -numa value, or QP_ARGI_IN_FILE */
  guint64 mem_bytes;   /* its RAM */
  gboolean legacy_mem; /* its RAM given with mem= (machine types to 5.0) */
} QpNumaNodeArg;

/* Where a device of req->io is written (parallel to it), for placing it
 * in the guest. */
typedef struct {
  guint vi;         /* argv index of its -device value, or QP_ARGI_IN_FILE */
  gboolean movable; /* a PCI -device with no bus= or addr= of the caller's,
                       whose id no other device's bus= names */
  gboolean json;    /* its -device value is JSON */
  char bus[64];     /* the caller's bus= ("" when none), cut at 63 bytes */
} QpIoPlace;

typedef struct {
  char **argv; /* the caller's QEMU arguments (without the binary) */
  guint argc;
  /* Not a launch (help, version, capability probe): exec straight through;
   * nothing below is read then. */
  gboolean passthrough;

  /* What names the VM. */
  char *name; /* -name (plain or guest=) */
  char *uuid;
  char *id; /* Proxmox's -id */

  /* How QEMU runs. */
  gboolean has_S;     /* caller passed -S */
  gboolean preconfig; /* --preconfig: NUMA may come over QMP before start */
  char *incoming;     /* -incoming value, or NULL */
  gboolean daemonize;
  char *pidfile;
  gboolean has_sandbox;

  /* The machine. */
  char *machine;          /* machine type as given ("pc" when none) */
  QpMachine machine_info; /* what its type means for -smp, -numa, the RAM */

  /* The guest's memory as the command line makes it. */
  guint64 ram_bytes;         /* initial RAM (req->mem_mib rounded up) */
  char *machine_memdev;      /* -machine memory-backend=, or NULL */
  GPtrArray *backends;       /* of QpBackend */
  QpNumaNodeArg *numa_nodes; /* parallel to req->gnodes */
  char *mem_path;            /* -mem-path (the last), or NULL */
  GArray *mem_path_argi;     /* of guint: argv index of every -mem-path */
  gboolean mem_prealloc;     /* -mem-prealloc */
  gboolean mem_lock; /* -overcommit mem-lock=on (the last -overcommit) */

  QpRequest *req;        /* what placement needs */
  GArray *io_places;     /* of QpIoPlace, parallel to req->io */
  GArray *vfio_places;   /* of QpIoPlace, parallel to req->vfio */
  GHashTable *pci_buses; /* device id -> its numa_node= (a caller's pxb)
                            or its bus= (a port or bridge): where a bus
                            the caller fixed sits in the guest */
  gboolean has_pxb;      /* the caller has expander buses of its own */
  GPtrArray *warnings;   /* of char*: what qemu-pin cannot model (a warning) */
  GPtrArray *notes;      /* of char*: what QEMU warns about itself (for -v) */
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
