/* QEMU's command line with the C library only (qemu-argv.h). */
#include "launcher/front/qemu-argv.h"

#include <stdlib.h>
#include <string.h>

#define N_ELEMENTS(a) (sizeof(a) / sizeof((a)[0]))

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

static int
in_list(const char *const *list, size_t n, const char *name)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp(list[i], name) == 0)
      return 1;
  return 0;
}

int
qp_opt_next(unsigned argc, char **argv, unsigned *pos, QpOpt *o,
            const char **missing)
{
  *missing = NULL;
  for (unsigned i = *pos; i < argc; i++) {
    const char *arg = argv[i];
    if (arg[0] != '-')
      continue;
    *o = (QpOpt){.name = arg + 1, .i = i};
    if (o->name[0] == '-')
      o->name++;
    if (in_list(options_with_arg, N_ELEMENTS(options_with_arg), o->name)) {
      if (i + 1 >= argc) {
        *missing = arg;
        *pos = argc;
        return 0;
      }
      o->vi = ++i;
      o->value = argv[i];
    }
    *pos = i + 1;
    return 1;
  }
  *pos = argc;
  return 0;
}

int
qp_opt_is(const QpOpt *o, const char *name)
{
  return strcmp(o->name, name) == 0;
}

int
qp_is_help_word(const char *s)
{
  return s != NULL && (strcmp(s, "help") == 0 || strcmp(s, "?") == 0);
}

/* ---- key=value ----------------------------------------------------------- */

/* The end of the value at P: the comma that ends it (",," is a comma of
 * the value), or the end of the text. */
static const char *
value_end(const char *p)
{
  while (*p != '\0' && !(*p == ',' && p[1] != ','))
    p += *p == ',' ? 2 : 1;
  return p;
}

/* Whether the LEN bytes at S are WORD. */
static int
bytes_are(const char *s, size_t len, const char *word)
{
  return strlen(word) == len && strncmp(s, word, len) == 0;
}

int
qp_kv_next(const char *text, size_t *pos, const char *implied, QpKvItem *item)
{
  const char *p = text + *pos;
  if (*p == '\0')
    return 0;
  *item = (QpKvItem){.start = *pos};
  size_t len = strcspn(p, "=,");
  if (p[len] == '=') {
    item->key = p;
    item->key_len = len;
    item->value = p + len + 1;
    p = value_end(item->value);
    item->value_len = (size_t)(p - item->value);
  } else if (*pos == 0 && implied != NULL) {
    item->key = implied;
    item->key_len = strlen(implied);
    item->value = p;
    p = value_end(p);
    item->value_len = (size_t)(p - item->value);
  } else {
    /* A flag: "foo" is foo=on, "nofoo" foo=off, "help" stays help. */
    item->flag = 1;
    item->key = p;
    item->key_len = len;
    item->value = "on";
    if (!bytes_are(p, len, "help") && !bytes_are(p, len, "?") && len >= 2 &&
        strncmp(p, "no", 2) == 0) {
      item->key += 2;
      item->key_len -= 2;
      item->value = "off";
    }
    item->value_len = strlen(item->value);
    p += len;
  }
  item->len = (size_t)(p - text) - item->start;
  if (*p == ',')
    p++;
  *pos = (size_t)(p - text);
  return 1;
}

char *
qp_kv_item_value(const QpKvItem *item)
{
  char *v = malloc(item->value_len + 1);
  if (v == NULL)
    return NULL;
  size_t n = 0;
  for (size_t i = 0; i < item->value_len; i++) {
    v[n++] = item->value[i];
    if (!item->flag && item->value[i] == ',')
      i++; /* ",," */
  }
  v[n] = '\0';
  return v;
}

int
qp_kv_key_is(const QpKvItem *item, const char *word)
{
  return bytes_are(item->key, item->key_len, word);
}

/* A value with no comma in it is written as it reads. */
int
qp_kv_value_is(const QpKvItem *item, const char *word)
{
  return strchr(word, ',') == NULL &&
         bytes_are(item->value, item->value_len, word);
}

/* ---- Help and probes ----------------------------------------------------- */

int
qp_opt_wants_help(const QpOpt *o)
{
  if (in_list(info_options, N_ELEMENTS(info_options), o->name))
    return 1;
  if (o->value == NULL || o->value[0] == '{' ||
      in_list(free_text_options, N_ELEMENTS(free_text_options), o->name))
    return 0;
  int is_name = strcmp(o->name, "name") == 0;
  /* -name help names the guest "help"; -name x,help asks for help. */
  if (qp_is_help_word(o->value) && !is_name)
    return 1;
  QpKvItem it;
  size_t pos = 0;
  for (unsigned i = 0; qp_kv_next(o->value, &pos, is_name ? "guest" : "", &it);
       i++) {
    if (it.flag && (qp_kv_key_is(&it, "help") || qp_kv_key_is(&it, "?")))
      return 1;
    /* -machine type=help, -device driver=help, -object qom-type=help... */
    if (!it.flag && (qp_kv_value_is(&it, "help") || qp_kv_value_is(&it, "?")) &&
        !qp_kv_key_is(&it, "guest") &&
        (i == 0 || qp_kv_key_is(&it, "type") || qp_kv_key_is(&it, "driver") ||
         qp_kv_key_is(&it, "qom-type")))
      return 1;
  }
  return 0;
}

int
qp_qemu_argv_passthrough(unsigned argc, char **argv)
{
  QpOpt o;
  const char *missing;
  int none = 0;
  for (unsigned pos = 0; qp_opt_next(argc, argv, &pos, &o, &missing);) {
    if (qp_opt_wants_help(&o))
      return 1;
    if (!qp_opt_is(&o, "machine") && !qp_opt_is(&o, "M"))
      continue;
    /* The machine's type: the last one of every -machine, merged. */
    QpKvItem it;
    size_t p = 0;
    while (qp_kv_next(o.value, &p, "type", &it))
      if (qp_kv_key_is(&it, "type"))
        none = qp_kv_value_is(&it, "none");
  }
  return none;
}

/* ---- The VM's names ------------------------------------------------------ */

/* *TO becomes a copy of FROM (NULL stays NULL). */
static int
set_copy(char **to, const char *from)
{
  free(*to);
  *to = from != NULL ? strdup(from) : NULL;
  return from == NULL || *to != NULL;
}

/* The last guest= of a -name value, or NULL. */
static int
guest_name(const char *value, char **out)
{
  QpKvItem it, last = {0};
  size_t pos = 0;
  int found = 0;
  while (qp_kv_next(value, &pos, "guest", &it))
    if (qp_kv_key_is(&it, "guest")) {
      last = it;
      found = 1;
    }
  free(*out);
  *out = found ? qp_kv_item_value(&last) : NULL;
  return !found || *out != NULL;
}

int
qp_vm_names_read(unsigned argc, char **argv, QpVmNames *out)
{
  *out = (QpVmNames){0};
  QpOpt o;
  const char *missing;
  int ok = 1;
  for (unsigned pos = 0; ok && qp_opt_next(argc, argv, &pos, &o, &missing);) {
    if (qp_opt_is(&o, "uuid"))
      ok = set_copy(&out->uuid, o.value);
    else if (qp_opt_is(&o, "id"))
      ok = set_copy(&out->id, o.value);
    else if (qp_opt_is(&o, "name"))
      ok = guest_name(o.value, &out->name);
  }
  if (!ok)
    qp_vm_names_clear(out);
  return ok;
}

void
qp_vm_names_clear(QpVmNames *names)
{
  free(names->name);
  free(names->uuid);
  free(names->id);
  *names = (QpVmNames){0};
}
