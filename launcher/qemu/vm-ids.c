#include "launcher/qemu/vm-ids.h"

#include <stdlib.h>

#include "launcher/front/qemu-argv.h"

QpVmIds *
qp_vm_ids_from_argv(guint argc, char **argv)
{
  QpVmNames names;
  if (!qp_vm_names_read(argc, argv, &names))
    g_error("out of memory");
  QpVmIds *ids = g_new0(QpVmIds, 1);
  ids->name = g_strdup(names.name);
  ids->uuid = g_strdup(names.uuid);
  ids->id = g_strdup(names.id);
  qp_vm_names_clear(&names);
  return ids;
}

void
qp_vm_ids_free(QpVmIds *ids)
{
  if (ids == NULL)
    return;
  g_free(ids->name);
  g_free(ids->uuid);
  g_free(ids->id);
  g_free(ids);
}
