/* QEMU's command line as far as the front needs it, with the C library
 * only (launcher/front/front.h): QEMU 7.2's option table, options read the
 * way its lookup_opt() reads them, the key=value items of a value, what
 * asks QEMU for help instead of a VM, and the VM's names. The full program
 * reads QEMU's argv through the same functions (launcher/qemu/). */
#pragma once

#include <stddef.h>

/* One option of the command line. */
typedef struct {
  const char *name;  /* without its dashes */
  unsigned i;        /* argv index of the option (see QP_ARGI_IN_FILE) */
  const char *value; /* NULL if it takes none */
  unsigned vi;       /* argv index of the value */
} QpOpt;

/* The option at or after *POS of ARGV (a word without a dash, a disk
 * image, is skipped), read into O; *POS moves past it and its value.
 * Returns 0 at the end, or when an option in the table lacks its argument
 * (then *MISSING is that option as written; else NULL). "--opt" is
 * "-opt"; an option in the table takes the next argument whatever it looks
 * like. */
int qp_opt_next(unsigned argc, char **argv, unsigned *pos, QpOpt *o,
                const char **missing);

int qp_opt_is(const QpOpt *o, const char *name);

/* "help" or "?": QEMU's words asking for help. */
int qp_is_help_word(const char *s);

/* Whether O makes QEMU print something and exit (help, version, a
 * property list) instead of running a VM. */
int qp_opt_wants_help(const QpOpt *o);

/* One item of QEMU's key=value syntax (QemuOpts): items separated by
 * commas, ",," a comma inside a value, the first item without "=" the
 * value of an implied key, any other one a flag ("foo" is foo=on, "nofoo"
 * foo=off, "help" stays help). */
typedef struct {
  const char *key; /* not NUL-terminated: KEY_LEN bytes */
  size_t key_len;
  const char *value; /* as written (",," escapes kept): VALUE_LEN bytes */
  size_t value_len;
  int flag;          /* written without "=" */
  size_t start, len; /* where the item is written in the text */
} QpKvItem;

/* The item of TEXT at *POS (0 for the first), IMPLIED (NULL: none) naming
 * the key of a first item without one; *POS moves to the next item.
 * Returns 0 at the end of TEXT. */
int qp_kv_next(const char *text, size_t *pos, const char *implied,
               QpKvItem *item);

/* The value of ITEM with its escapes undone: a NUL-terminated string of
 * malloc(), or NULL when out of memory. */
char *qp_kv_item_value(const QpKvItem *item);

/* Whether the key, or the value, of ITEM is WORD. */
int qp_kv_key_is(const QpKvItem *item, const char *word);
int qp_kv_value_is(const QpKvItem *item, const char *word);

/* Not a launch: help, version, a capability probe (-machine none, as
 * libvirt's -machine none,accel=...), read from the options of ARGV before
 * one that lacks its argument. */
int qp_qemu_argv_passthrough(unsigned argc, char **argv);

/* What names the VM in qemu-pin's config file: -name (plain or guest=),
 * -uuid and Proxmox's -id, NULL when not given; strings of malloc(). */
typedef struct {
  char *name;
  char *uuid;
  char *id;
} QpVmNames;

/* Reads them from ARGV (the binary excluded), with no check that can fail.
 * Returns 0 when out of memory. */
int qp_vm_names_read(unsigned argc, char **argv, QpVmNames *out);
void qp_vm_names_clear(QpVmNames *names);
