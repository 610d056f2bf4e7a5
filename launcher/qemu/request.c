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
#include "launcher/qemu/io-devices.h"
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
  if (args->io_places)
    g_array_unref(args->io_places);
  if (args->vfio_places)
    g_array_unref(args->vfio_places);
  if (args->pci_buses)
    g_hash_table_unref(args->pci_buses);
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

/* The key=value items of every option NAME (or ALIAS) of OPTS, merged in
 * order as QEMU merges them. */
static GArray *
options_kv(GArray *opts, const char *name, const char *alias,
           const char *implied)
{
  GArray *kv = qp_kv_new();
  for (guint i = 0; i < opts->len; i++) {
    const QpOpt *o = &g_array_index(opts, QpOpt, i);
    if (qp_opt_is(o, name) || (alias != NULL && qp_opt_is(o, alias)))
      qp_kv_parse_into(kv, o->value, implied);
  }
  return kv;
}

/* A copy of P under KEY, for KV. */
static void
kv_copy_as(GArray *kv, const QpKvPair *p, const char *key)
{
  QpKvPair copy = {
      .key = g_strdup(key), .value = g_strdup(p->value), .text = p->text};
  g_array_append_val(kv, copy);
}

/* -smp and -machine smp.* fill the same properties of the machine: QEMU
 * 7.2 merges each option into them as it reads it (keyval_merge()), key by
 * key, so "-machine smp.cpus=4 -smp sockets=2" has 4 vCPUs and "-smp 2
 * -machine smp.maxcpus=8" 8 slots. The items of both in command-line
 * order; *FROM_MACHINE says whether the last came from -machine. */
static GArray *
smp_kv(GArray *opts, gboolean *from_machine)
{
  GArray *kv = qp_kv_new();
  *from_machine = FALSE;
  for (guint i = 0; i < opts->len; i++) {
    const QpOpt *o = &g_array_index(opts, QpOpt, i);
    if (qp_opt_is(o, "smp")) {
      guint before = kv->len;
      qp_kv_parse_into(kv, o->value, "cpus");
      if (kv->len > before)
        *from_machine = FALSE;
    } else if (qp_opt_is(o, "machine") || qp_opt_is(o, "M")) {
      g_autoptr(GArray) m = qp_kv_parse(o->value, "type");
      for (guint j = 0; j < m->len; j++) {
        const QpKvPair *p = &g_array_index(m, QpKvPair, j);
        if (g_str_has_prefix(p->key, "smp.")) {
          kv_copy_as(kv, p, p->key + 4);
          *from_machine = TRUE;
        }
      }
    }
  }
  return kv;
}

/* -m is merged into the machine's memory.* after every option is read
 * (parse_memory_options()): a key -m gives wins, the others of -machine
 * memory.* stay ("-machine memory.size=256M -m slots=1,maxmem=1G" has 256
 * MiB). MACHINE's memory.* items, then -m's; *N_MACHINE counts the
 * former (their sizes count bytes, -m's MiB). */
static GArray *
memory_kv(GArray *opts, GArray *machine, guint *n_machine)
{
  GArray *kv = qp_kv_new();
  for (guint i = 0; i < machine->len; i++) {
    const QpKvPair *p = &g_array_index(machine, QpKvPair, i);
    if (!g_str_has_prefix(p->key, "memory."))
      continue;
    const char *k = p->key + 7;
    kv_copy_as(kv, p,
               strcmp(k, "max-size") == 0 ? "maxmem"
               : strcmp(k, "maxmem") == 0 ? "memory.maxmem"
                                          : k);
  }
  *n_machine = kv->len;
  g_autoptr(GArray) m = options_kv(opts, "m", NULL, "size");
  for (guint i = 0; i < m->len; i++) {
    const QpKvPair *p = &g_array_index(m, QpKvPair, i);
    kv_copy_as(kv, p, p->key);
  }
  return kv;
}

/* -overcommit TEXT: each one sets mem-lock anew (off unless given), as
 * QEMU 7.2 reads it. A value QEMU refuses leaves it off: QEMU's message
 * reaches the caller at launch. */
static void
read_overcommit(QpQemuArgs *a, const char *text)
{
  g_autoptr(GArray) kv = qp_kv_parse(text, NULL);
  const char *lock = qp_kv_get(kv, "mem-lock");
  gboolean on = FALSE;
  a->mem_lock = lock != NULL && qp_parse_bool(lock, &on) && on;
}

/* The options read as they stand: how QEMU runs, -mem-path and
 * -mem-prealloc, the -object values. */
static gboolean
read_plain_options(QpQemuArgs *a, GArray *opts, GError **error)
{
  for (guint i = 0; i < opts->len; i++) {
    const QpOpt *o = &g_array_index(opts, QpOpt, i);
    if (qp_opt_is(o, "S"))
      a->has_S = TRUE;
    else if (qp_opt_is(o, "preconfig"))
      a->preconfig = TRUE;
    else if (qp_opt_is(o, "daemonize"))
      a->daemonize = TRUE;
    else if (qp_opt_is(o, "sandbox"))
      a->has_sandbox = TRUE;
    else if (qp_opt_is(o, "mem-prealloc"))
      a->mem_prealloc = TRUE;
    else if (qp_opt_is(o, "overcommit"))
      read_overcommit(a, o->value);
    else if (qp_opt_is(o, "mem-path")) {
      g_free(a->mem_path);
      a->mem_path = g_strdup(o->value);
      g_array_append_val(a->mem_path_argi, o->i);
    } else if (qp_opt_is(o, "incoming"))
      g_free(a->incoming), a->incoming = g_strdup(o->value);
    else if (qp_opt_is(o, "pidfile"))
      g_free(a->pidfile), a->pidfile = g_strdup(o->value);
    else if (qp_opt_is(o, "object") && !qp_object_read(a, o, error))
      return FALSE;
  }
  return TRUE;
}

/* -smp's items SMP; when they came from -machine smp.* (FROM_MACHINE), the
 * error names the option the caller wrote. */
static gboolean
read_smp(QpQemuArgs *a, GArray *smp, gboolean from_machine, GError **error)
{
  if (qp_smp_read(a, smp, error))
    return TRUE;
  if (from_machine && error != NULL && *error != NULL &&
      g_str_has_prefix((*error)->message, "-smp '")) {
    char *m = g_strconcat("-machine '", (*error)->message + 6, NULL);
    g_free((*error)->message);
    (*error)->message = m;
  }
  return FALSE;
}

/* Preallocation, over every backend: -mem-prealloc makes every memory
 * backend preallocate (it is a global property in 7.2). */
static void
read_prealloc(QpQemuArgs *a)
{
  QpRequest *r = a->req;
  for (guint i = 0; i < a->backends->len; i++) {
    QpBackend *b = g_ptr_array_index(a->backends, i);
    if (a->mem_prealloc)
      b->prealloc = TRUE;
    r->prealloc |= b->prealloc;
  }
  if (a->mem_prealloc)
    r->prealloc = TRUE;
}

/* OPTS (the command line's and its -readconfig files') into A, in the
 * order their meanings depend on each other. */
static gboolean
read_options(QpQemuArgs *a, GArray *opts, GError **error)
{
  g_autoptr(GArray) machine = options_kv(opts, "machine", "M", "type");
  gboolean smp_from_machine;
  guint mem_from_machine;
  g_autoptr(GArray) smp = smp_kv(opts, &smp_from_machine);
  g_autoptr(GArray) mem = memory_kv(opts, machine, &mem_from_machine);
  g_autoptr(GPtrArray) devices = g_ptr_array_new();

  const char *type = qp_kv_get(machine, "type");
  a->machine = g_strdup(type ? type : "pc");
  a->machine_info = qp_machine_lookup(a->machine);
  a->machine_memdev = g_strdup(qp_kv_get(machine, "memory-backend"));

  if (!read_plain_options(a, opts, error) ||
      !read_smp(a, smp, smp_from_machine, error) ||
      !qp_ram_read(a, mem, mem_from_machine, error) ||
      !qp_numa_read(a, opts, error) ||
      !qp_devices_read(a, opts, devices, error))
    return FALSE;
  qp_io_devices_read(a, opts, "/sys");
  read_prealloc(a);
  qp_memory_model(a, devices);
  return TRUE;
}

/* Not a launch: help, version, a capability probe (-machine none, as
 * libvirt's -machine none,accel=...). */
static gboolean
is_passthrough(GArray *opts)
{
  for (guint i = 0; i < opts->len; i++)
    if (qp_opt_wants_help(&g_array_index(opts, QpOpt, i)))
      return TRUE;
  g_autoptr(GArray) machine = options_kv(opts, "machine", "M", "type");
  const char *type = qp_kv_get(machine, "type");
  return type != NULL && strcmp(type, "none") == 0;
}

static QpQemuArgs *
args_new(guint argc, char **argv)
{
  QpQemuArgs *a = g_new0(QpQemuArgs, 1);
  a->argc = argc;
  a->argv = g_new0(char *, argc + 1);
  for (guint i = 0; i < argc; i++)
    a->argv[i] = g_strdup(argv[i]);
  a->req = qp_request_new();
  a->io_places = g_array_new(FALSE, TRUE, sizeof(QpIoPlace));
  a->vfio_places = g_array_new(FALSE, TRUE, sizeof(QpIoPlace));
  a->pci_buses = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  a->backends = g_ptr_array_new_with_free_func(qp_backend_free);
  a->warnings = g_ptr_array_new_with_free_func(g_free);
  a->notes = g_ptr_array_new_with_free_func(g_free);
  a->mem_path_argi = g_array_new(FALSE, FALSE, sizeof(guint));
  g_autoptr(QpVmIds) ids = qp_vm_ids_from_argv(argc, a->argv);
  a->name = g_steal_pointer(&ids->name);
  a->uuid = g_steal_pointer(&ids->uuid);
  a->id = g_steal_pointer(&ids->id);
  return a;
}

QpQemuArgs *
qp_qemu_args_parse(guint argc, char **argv, GError **error)
{
  g_autoptr(QpQemuArgs) a = args_new(argc, argv);
  const char *missing = NULL;
  g_autoptr(GArray) opts = qp_opts_scan(a->argc, a->argv, &missing);

  a->passthrough = is_passthrough(opts);
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
  if (!read_options(a, all, error)) {
    qp_readconfig_name_source(file_values, error);
    return NULL;
  }
  return g_steal_pointer(&a);
}
