/* QEMU's key=value option syntax (QemuOpts), as qemu-args.c reads it, for
 * the other parsers of the launcher. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The items of TEXT ("a=1,b=x,,y,flag"), IMPLIED naming the key of a first
 * item written without one. An array to free with g_array_unref(). */
GArray *qp_kv_parse(const char *text, const char *implied);

/* The last value of KEY in KV, or NULL. */
const char *qp_kv_get(GArray *kv, const char *key);

G_END_DECLS
