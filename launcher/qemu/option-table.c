#include "launcher/qemu/option-table.h"

#include <string.h>

#include "launcher/qemu/keyval.h"

/* Every option of QEMU 7.2's qemu-system-x86_64 that takes an argument
 * (HAS_ARG in qemu-options.hx), in the binary's order, as its
 * qemu_options[] table (Debian's 7.2.22, 121 entries) has them; each one
 * answers `qemu-system-x86_64 -version -NAME` with "requires an argument".
 * Options of other targets are kept (QEMU consumes their argument before
 * refusing them). An option not listed takes none. "id" is Proxmox's: its
 * kvm takes `-id VMID`. */
static const char *const options_with_arg[] = {
    "machine",    "M",
    "cpu",        "accel",
    "smp",        "numa",
    "add-fd",     "set",
    "global",     "boot",
    "m",          "mem-path",
    "k",          "audio",
    "audiodev",   "device",
    "name",       "uuid",
    "fda",        "fdb",
    "hda",        "hdb",
    "hdc",        "hdd",
    "cdrom",      "blockdev",
    "drive",      "mtdblock",
    "sd",         "fsdev",
    "virtfs",     "iscsi",
    "usbdevice",  "display",
    "spice",      "rotate",
    "vga",        "g",
    "vnc",        "acpitable",
    "smbios",     "netdev",
    "nic",        "net",
    "chardev",    "tpmdev",
    "bios",       "pflash",
    "kernel",     "append",
    "initrd",     "dtb",
    "compat",     "fw_cfg",
    "serial",     "parallel",
    "monitor",    "qmp",
    "qmp-pretty", "mon",
    "debugcon",   "pidfile",
    "overcommit", "gdb",
    "d",          "D",
    "dfilter",    "seed",
    "L",          "xen-domid",
    "action",     "loadvm",
    "option-rom", "rtc",
    "icount",     "watchdog-action",
    "echr",       "incoming",
    "chroot",     "runas",
    "prom-env",   "semihosting-config",
    "sandbox",    "readconfig",
    "trace",      "plugin",
    "qtest",      "qtest-log",
    "msg",        "dump-vmstate",
    "object",     "id",
};

/* Options whose value is free text: a value "help" there is not a request
 * for help. */
static const char *const free_text_options[] = {
    "uuid",       "pidfile",  "incoming",     "id",      "append",
    "kernel",     "initrd",   "bios",         "L",       "dtb",
    "hda",        "hdb",      "hdc",          "hdd",     "fda",
    "fdb",        "cdrom",    "mtdblock",     "sd",      "pflash",
    "loadvm",     "runas",    "chroot",       "D",       "readconfig",
    "option-rom", "mem-path", "dump-vmstate", "add-fd",  "seed",
    "xen-domid",  "qmp",      "qmp-pretty",   "monitor", "serial",
    "parallel",   "debugcon", "gdb",          "echr",    "k",
    "dfilter",
};

/* Options that print something and exit: never a launch. */
static const char *const info_options[] = {
    "h", "help", "version", "audio-help", "dump-vmstate",
};

static gboolean
in_list(const char *const *list, gsize n, const char *name)
{
  for (gsize i = 0; i < n; i++)
    if (strcmp(list[i], name) == 0)
      return TRUE;
  return FALSE;
}

static gboolean
option_has_arg(const char *name)
{
  return in_list(options_with_arg, G_N_ELEMENTS(options_with_arg), name);
}

GArray *
qp_opts_scan(guint argc, char **argv, const char **missing)
{
  GArray *opts = g_array_new(FALSE, TRUE, sizeof(QpOpt));
  *missing = NULL;
  for (guint i = 0; i < argc; i++) {
    const char *arg = argv[i];
    QpOpt o = {0};
    if (arg[0] != '-')
      continue;
    o.name = arg + 1;
    if (o.name[0] == '-')
      o.name++;
    o.i = i;
    if (option_has_arg(o.name)) {
      if (i + 1 >= argc) {
        *missing = arg;
        break;
      }
      o.vi = ++i;
      o.value = argv[i];
    }
    g_array_append_val(opts, o);
  }
  return opts;
}

gboolean
qp_opt_is(const QpOpt *o, const char *name)
{
  return strcmp(o->name, name) == 0;
}

gboolean
qp_opt_wants_help(const QpOpt *o)
{
  if (in_list(info_options, G_N_ELEMENTS(info_options), o->name))
    return TRUE;
  if (o->value == NULL || o->value[0] == '{' ||
      in_list(free_text_options, G_N_ELEMENTS(free_text_options), o->name))
    return FALSE;
  /* -name help names the guest "help"; -name x,help asks for help. */
  if (qp_is_help_word(o->value) && strcmp(o->name, "name") != 0)
    return TRUE;
  g_autoptr(GArray) kv =
      qp_kv_parse(o->value, strcmp(o->name, "name") == 0 ? "guest" : "");
  if (qp_kv_wants_help(kv))
    return TRUE;
  /* -machine type=help, -device driver=help, -object qom-type=help... */
  for (guint i = 0; i < kv->len; i++) {
    QpKvPair *p = &g_array_index(kv, QpKvPair, i);
    if (!p->flag && qp_is_help_word(p->value) && strcmp(p->key, "guest") != 0 &&
        (i == 0 || strcmp(p->key, "type") == 0 ||
         strcmp(p->key, "driver") == 0 || strcmp(p->key, "qom-type") == 0))
      return TRUE;
  }
  return FALSE;
}
