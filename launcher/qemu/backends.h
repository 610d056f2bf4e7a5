/* -object: the memory backends (memory-backend-ram, -file, -memfd, -epc)
 * the caller makes, in either syntax (key=value or JSON), and the
 * iothreads. */
#pragma once

#include "launcher/qemu/args.h"
#include "launcher/qemu/option-table.h"

G_BEGIN_DECLS

/* Reads the -object O into A: a memory backend into A->backends, an
 * iothread into the request's count; other objects are QEMU's alone. */
gboolean qp_object_read(QpQemuArgs *a, const QpOpt *o, GError **error);

/* The backend of A with id ID, or NULL (also for a NULL ID). */
QpBackend *qp_backend_find(const QpQemuArgs *a, const char *id);

void qp_backend_free(gpointer backend);

G_END_DECLS
