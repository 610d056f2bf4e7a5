/* QEMU's command line read for placement.
 *
 * The semantics are QEMU 7.2's (qemu-system-x86_64): the option table, the
 * QemuOpts key=value syntax, -smp's machine_parse_smp_config(), -m's
 * parse_memory_options(), -numa's numa.c and the -object rules. A value
 * is refused only where QEMU 7.2 refuses it too (tests/args/test-refusals.c
 * holds QEMU's own message for each); what QEMU accepts with a warning
 * (-smp 0, -m 0) is read as QEMU reads it. */
#include "launcher/qemu/args.h"

#include <string.h>

#include "launcher/qemu/backends.h"
#include "launcher/qemu/devices.h"
#include "launcher/qemu/keyval.h"
#include "launcher/qemu/memory.h"
#include "launcher/qemu/numa.h"
#include "launcher/qemu/numbers.h"
#include "launcher/qemu/option-table.h"
#include "launcher/qemu/ram.h"
#include "launcher/qemu/readconfig.h"
#include "launcher/qemu/smp.h"
#include "launcher/qemu/vm-ids.h"

void
qp_qemu_args_free(QpQemuArgs *args)
{
  if (args == NULL)
    return;
  g_strfreev(args->argv);
  qp_request_free(args->req);
  if (args->backends)
    g_ptr_array_unref(args->backends);
  g_free(args->machine_memdev);
  g_free(args->incoming);
  g_free(args->pidfile);
  g_free(args->name);
  g_free(args->uuid);
  g_free(args->id);
  g_free(args->machine);
  if (args->warnings)
    g_ptr_array_unref(args->warnings);
  if (args->notes)
    g_ptr_array_unref(args->notes);
  g_free(args->numa_nodes);
  g_free(args->mem_path);
  if (args->mem_path_argi)
    g_array_unref(args->mem_path_argi);
  g_free(args);
}

const char *
qp_qemu_args_ram_id(const QpQemuArgs *args)
{
  return args->machine_info.ram_id ? args->machine_info.ram_id : "qemu-pin-ram";
}

static gboolean
parse_all(QpQemuArgs *a, GArray *opts, GError **error)
{
  g_autoptr(GArray) machine = qp_kv_new(), smp = qp_kv_new(), mem = qp_kv_new();
  const char *smp_text = "", *v;
  gboolean smp_from_machine = FALSE;
  gboolean custom_ram = FALSE;

  for (guint i = 0; i < opts->len; i++) {
    const QpOpt *o = &g_array_index(opts, QpOpt, i);
    if (qp_opt_is(o, "machine") || qp_opt_is(o, "M"))
      qp_kv_parse_into(machine, o->value, "type");
    else if (qp_opt_is(o, "smp")) {
      qp_kv_parse_into(smp, o->value, "cpus");
      smp_text = o->value;
    } else if (qp_opt_is(o, "m"))
      qp_kv_parse_into(mem, o->value, "size");
  }
  /* -machine smp.cpus=4 and memory.size=1G do what -smp and -m do, unless
   * those are given: then QEMU 7.2 takes them and ignores the others. */
  gboolean mem_bytes = FALSE;
  if (smp->len == 0 || mem->len == 0) {
    gboolean from_smp = smp->len == 0, from_mem = mem->len == 0;
    for (guint i = 0; i < machine->len; i++) {
      QpKvPair *p = &g_array_index(machine, QpKvPair, i);
      QpKvPair copy = {.value = g_strdup(p->value), .text = p->text};
      if (from_smp && g_str_has_prefix(p->key, "smp.")) {
        copy.key = g_strdup(p->key + 4);
        g_array_append_val(smp, copy);
        smp_text = p->text;
        smp_from_machine = TRUE;
      } else if (from_mem && g_str_has_prefix(p->key, "memory.")) {
        const char *k = p->key + 7;
        copy.key = g_strdup(strcmp(k, "max-size") == 0 ? "maxmem"
                            : strcmp(k, "maxmem") == 0 ? "memory.maxmem"
                                                       : k);
        g_array_append_val(mem, copy);
        mem_bytes = TRUE;
      } else {
        g_free(copy.value);
      }
    }
  }
  v = qp_kv_get(machine, "type");
  a->machine = g_strdup(v ? v : "pc");
  a->machine_info = qp_machine_lookup(a->machine);
  if ((v = qp_kv_get(machine, "memory-backend")) != NULL)
    a->machine_memdev = g_strdup(v);

  for (guint i = 0; i < opts->len; i++) {
    const QpOpt *o = &g_array_index(opts, QpOpt, i);
    if (qp_opt_is(o, "S"))
      a->has_S = TRUE;
    else if (qp_opt_is(o, "daemonize"))
      a->daemonize = TRUE;
    else if (qp_opt_is(o, "sandbox"))
      a->has_sandbox = TRUE;
    else if (qp_opt_is(o, "mem-prealloc"))
      a->mem_prealloc = TRUE;
    else if (qp_opt_is(o, "mem-path")) {
      g_free(a->mem_path);
      a->mem_path = g_strdup(o->value);
      g_array_append_val(a->mem_path_argi, o->i);
    } else if (qp_opt_is(o, "incoming"))
      g_free(a->incoming), a->incoming = g_strdup(o->value);
    else if (qp_opt_is(o, "pidfile"))
      g_free(a->pidfile), a->pidfile = g_strdup(o->value);
    else if (qp_opt_is(o, "object")) {
      if (!qp_object_read(a, o, error))
        return FALSE;
    }
  }

  if (!qp_smp_read(a, smp, smp_text, error)) {
    /* The topology came from -machine smp.*: name what the caller wrote. */
    if (smp_from_machine && error != NULL && *error != NULL &&
        g_str_has_prefix((*error)->message, "-smp '")) {
      char *m = g_strconcat("-machine '", (*error)->message + 6, NULL);
      g_free((*error)->message);
      (*error)->message = m;
    }
    return FALSE;
  }
  if (!qp_ram_read(a, mem, mem_bytes, &custom_ram, error))
    return FALSE;

  if (a->machine_memdev != NULL) {
    QpBackend *b = qp_backend_find(a, a->machine_memdev);
    if (b == NULL)
      return qp_args_invalid(error,
                             "-machine memory-backend=%s names no -object "
                             "memory-backend-*",
                             a->machine_memdev);
    if (!custom_ram && b->size_bytes != 0) {
      a->ram_bytes = b->size_bytes;
      a->req->mem_mib = b->size_mib;
    } else if (custom_ram && b->size_bytes != 0 &&
               b->size_bytes != a->ram_bytes)
      return qp_args_invalid(
          error,
          "-machine memory-backend=%s: the backend has %" G_GUINT64_FORMAT
          " bytes but -m asks for %" G_GUINT64_FORMAT ": they must "
          "be equal",
          a->machine_memdev, b->size_bytes, a->ram_bytes);
  }

  if (!qp_numa_read(a, opts, error))
    return FALSE;

  g_autoptr(GPtrArray) devices = g_ptr_array_new();
  if (!qp_devices_read(a, opts, devices, error))
    return FALSE;

  /* Preallocation, over every backend. -mem-prealloc makes every memory
   * backend preallocate (it is a global property in 7.2). */
  QpRequest *r = a->req;
  for (guint i = 0; i < a->backends->len; i++) {
    QpBackend *b = g_ptr_array_index(a->backends, i);
    if (a->mem_prealloc)
      b->prealloc = TRUE;
    r->prealloc |= b->prealloc;
  }
  if (a->mem_prealloc)
    r->prealloc = TRUE;
  qp_memory_model(a, devices, a->mem_path);
  return TRUE;
}

QpQemuArgs *
qp_qemu_args_parse(guint argc, char **argv, GError **error)
{
  g_autoptr(QpQemuArgs) a = g_new0(QpQemuArgs, 1);
  g_autoptr(GArray) opts = NULL;
  const char *missing = NULL;

  a->argc = argc;
  a->argv = g_new0(char *, argc + 1);
  for (guint i = 0; i < argc; i++)
    a->argv[i] = g_strdup(argv[i]);
  a->req = qp_request_new();
  a->backends = g_ptr_array_new_with_free_func(qp_backend_free);
  a->warnings = g_ptr_array_new_with_free_func(g_free);
  a->notes = g_ptr_array_new_with_free_func(g_free);
  a->mem_path_argi = g_array_new(FALSE, FALSE, sizeof(guint));
  a->ram_bytes = 128 * QP_MiB;
  {
    g_autoptr(QpVmIds) ids = qp_vm_ids_from_argv(argc, a->argv);
    a->name = g_steal_pointer(&ids->name);
    a->uuid = g_steal_pointer(&ids->uuid);
    a->id = g_steal_pointer(&ids->id);
  }

  opts = qp_opts_scan(a->argc, a->argv, &missing);
  for (guint i = 0; i < opts->len; i++)
    if (qp_opt_wants_help(&g_array_index(opts, QpOpt, i)))
      a->passthrough = TRUE;
  if (!a->passthrough) {
    /* A capability probe: -machine none (libvirt: -machine none,accel=...) */
    g_autoptr(GArray) machine = qp_kv_new();
    for (guint i = 0; i < opts->len; i++) {
      const QpOpt *o = &g_array_index(opts, QpOpt, i);
      if (qp_opt_is(o, "machine") || qp_opt_is(o, "M"))
        qp_kv_parse_into(machine, o->value, "type");
    }
    const char *type = qp_kv_get(machine, "type");
    if (type != NULL && strcmp(type, "none") == 0)
      a->passthrough = TRUE;
  }
  if (a->passthrough)
    return g_steal_pointer(&a);
  if (missing != NULL) {
    qp_args_invalid(error, "%s requires an argument", missing);
    return NULL;
  }
  g_autoptr(GPtrArray) file_values = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GArray) all =
      qp_readconfig_expand(opts, file_values, a->warnings, error);
  if (all == NULL)
    return NULL;
  if (!parse_all(a, all, error)) {
    qp_readconfig_name_source(file_values, error);
    return NULL;
  }
  g_autoptr(GString) unbound = g_string_new(NULL);
  for (guint i = 0; i < a->backends->len; i++) {
    const QpBackend *b = g_ptr_array_index(a->backends, i);
    if (b->argi == QP_ARGI_IN_FILE && b->host_nodes == NULL)
      g_string_append_printf(unbound, "%s'%s'", unbound->len ? ", " : "",
                             b->id);
  }
  if (unbound->len > 0)
    g_ptr_array_add(a->warnings,
                    g_strdup_printf("memory backends %s of -readconfig files "
                                    "cannot be given host-nodes: the "
                                    "process's memory policy binds them",
                                    unbound->str));
  return g_steal_pointer(&a);
}
