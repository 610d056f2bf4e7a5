/* qemu-pin's errors: the GError domain of each library and its codes, and
 * the exit status each error gives.
 *
 * The contract (crun's): a function that can fail takes GError **error as
 * its last parameter and returns FALSE, NULL or a negative number when it
 * fails; the error carries what the command line edge needs, and only that
 * edge (launcher/commands.c) prints it and exits, with
 * qp_error_exit_status(). The keeper, a process of its own, is its own edge.
 *
 * This one header serves the three libraries, so it lives at the root of
 * the tree: topology/ and qmp/ depend on neither each other nor launcher/,
 * and a header in one of their folders would read as such a dependency. It
 * declares; each library defines its own domain's quark
 * (topology/base/cpulist.c, qmp/qmp.c, launcher/options.c,
 * launcher/qemu-args.c), so that no library links another's. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* topology/: the host model, the planner and the ledger. */
#define QP_TOPOLOGY_ERROR (qp_topology_error_quark())
GQuark qp_topology_error_quark(void);

typedef enum {
  QP_TOPOLOGY_ERROR_INVALID, /* malformed input (list, XML, record) */
  QP_TOPOLOGY_ERROR_LOAD,    /* hwloc could not load the host */
  QP_TOPOLOGY_ERROR_NOFIT,   /* the request does not fit */
  QP_TOPOLOGY_ERROR_LEDGER,  /* state directory / ledger I/O */
  /* a --topology file missing or not a topology: the caller's bad input */
  QP_TOPOLOGY_ERROR_FILE,
} QpTopologyError;

/* qmp/: the QMP client. */
#define QP_QMP_ERROR (qp_qmp_error_quark())
GQuark qp_qmp_error_quark(void);

typedef enum {
  QP_QMP_ERROR_IO,       /* read/write failed, peer closed */
  QP_QMP_ERROR_TIMEOUT,  /* no answer in time */
  QP_QMP_ERROR_PROTOCOL, /* garbage, unexpected message */
  QP_QMP_ERROR_COMMAND,  /* QEMU answered with an error */
} QpQmpError;

/* launcher/: QEMU's command line as qemu-pin reads it. */
#define QP_ARGS_ERROR (qp_args_error_quark())
GQuark qp_args_error_quark(void);

typedef enum {
  QP_ARGS_ERROR_INVALID, /* a malformed value in an option we must read */
} QpArgsError;

/* launcher/: qemu-pin's own settings, the launch and the keeper. */
#define QP_LAUNCH_ERROR (qp_launch_error_quark())
GQuark qp_launch_error_quark(void);

typedef enum {
  QP_LAUNCH_ERROR_USAGE,       /* bad option, value or config */
  QP_LAUNCH_ERROR_FAILED,      /* launch failed */
  QP_LAUNCH_ERROR_NO_BINARY,   /* the QEMU binary to run does not exist */
  QP_LAUNCH_ERROR_EXEC,        /* the QEMU binary cannot be run */
  QP_LAUNCH_ERROR_QEMU_EXITED, /* QEMU exited before its monitor answered */
  /* a move refused: the caller placed the VM itself (its keeper's answer
   * says "code": "caller-placed") */
  QP_LAUNCH_ERROR_CALLER_PLACED,
  /* a move refused for what the VM is (memory that can be plugged, VFIO,
   * hugepages...) or a keeper that does not answer: nothing changed, and
   * `rebalance` plans again without that VM ("code": "refused") */
  QP_LAUNCH_ERROR_MOVE_REFUSED,
} QpLaunchError;

/* The exit status for ERROR: 2 for bad usage, 127 and 126 when QEMU's
 * binary is missing or cannot run (as a shell says), 1 for every other
 * refusal or failure. Once QEMU runs, its own status is the exit status. */
static inline int
qp_error_exit_status(const GError *error)
{
  if (error->domain == QP_TOPOLOGY_ERROR &&
      error->code == QP_TOPOLOGY_ERROR_FILE)
    return 2;
  if (error->domain != QP_LAUNCH_ERROR)
    return 1;
  switch (error->code) {
  case QP_LAUNCH_ERROR_USAGE:
    return 2;
  case QP_LAUNCH_ERROR_NO_BINARY:
    return 127;
  case QP_LAUNCH_ERROR_EXEC:
    return 126;
  default:
    return 1;
  }
}

G_END_DECLS
