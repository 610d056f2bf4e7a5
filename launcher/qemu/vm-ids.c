#include "launcher/qemu/vm-ids.h"

#include "launcher/qemu/keyval.h"
#include "launcher/qemu/option-table.h"

QpVmIds *
qp_vm_ids_from_argv(guint argc, char **argv)
{
  const char *missing;
  g_autoptr(GArray) opts = qp_opts_scan(argc, argv, &missing);
  QpVmIds *ids = g_new0(QpVmIds, 1);
  for (guint i = 0; i < opts->len; i++) {
    const QpOpt *o = &g_array_index(opts, QpOpt, i);
    if (qp_opt_is(o, "uuid")) {
      g_free(ids->uuid);
      ids->uuid = g_strdup(o->value);
    } else if (qp_opt_is(o, "id")) {
      g_free(ids->id);
      ids->id = g_strdup(o->value);
    } else if (qp_opt_is(o, "name")) {
      g_autoptr(GArray) kv = qp_kv_parse(o->value, "guest");
      g_free(ids->name);
      ids->name = g_strdup(qp_kv_get(kv, "guest"));
    }
  }
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
