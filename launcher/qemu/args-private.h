/* Parser state the rewrite needs. */
#pragma once

#include "launcher/qemu/args.h"
#include "launcher/qemu/machine.h"

typedef struct {
  guint argi;          /* argv index of the -numa node value */
  guint64 mem_bytes;   /* memory of the node */
  gboolean legacy_mem; /* mem= */
} NodeExtra;

struct _QpQemuArgsPriv {
  NodeExtra *nodes;   /* parallel to req->gnodes */
  gboolean split_mem; /* no node had memory: qemu-pin splits the RAM */
  char *mem_path;     /* -mem-path */
  GArray *mem_path_i; /* argv indexes of the -mem-path options */
  gboolean mem_prealloc;
  QpMachine machine;
  GPtrArray *file_values; /* of char*: option values read from files, each
                             followed by "FILE:LINE [group]" */
};
