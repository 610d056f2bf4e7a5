#include "launcher/qemu/readconfig.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "launcher/qemu/error.h"
#include "launcher/qemu/keyval.h"
#include "launcher/qemu/option-table.h"

/* A section of a config file. */
typedef struct {
  char *group; /* "machine", "device", "object", "smp-opts", "memory", ... */
  char *id;    /* from '[group "id"]', or NULL */
  guint line;  /* of the header */
  GPtrArray *keys;   /* of char*, in file order */
  GPtrArray *values; /* of char*, parallel to keys */
} ConfigSection;

static void
config_section_free(ConfigSection *section)
{
  if (section == NULL)
    return;
  g_free(section->group);
  g_free(section->id);
  g_ptr_array_unref(section->keys);
  g_ptr_array_unref(section->values);
  g_free(section);
}

static ConfigSection *
section_new(const char *group, const char *id, guint line)
{
  ConfigSection *s = g_new0(ConfigSection, 1);
  s->group = g_strdup(group);
  s->id = g_strdup(id);
  s->line = line;
  s->keys = g_ptr_array_new_with_free_func(g_free);
  s->values = g_ptr_array_new_with_free_func(g_free);
  return s;
}

static void
close_fp(FILE *fp)
{
  fclose(fp);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FILE, close_fp)

/* The sections of PATH (of ConfigSection). NULL with a G_FILE_ERROR when
 * the file cannot be read or is not a regular file (a pipe read here would
 * be read away from QEMU), or with QP_ARGS_ERROR_INVALID for what QEMU 7.2
 * refuses in the file's syntax too: a key before any group ("no group
 * defined") and a line that is neither ("parse error"). What the keys mean
 * is left to the options they become. */
static GPtrArray *
readconfig_read(const char *path, GError **error)
{
  /* A pipe or a device (-readconfig /dev/stdin) would be read away from
   * QEMU, or block: only a regular file is read here. */
  struct stat st;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
    g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                "is not a regular file (it is left to QEMU alone)");
    return NULL;
  }
  g_autoptr(FILE) fp = fopen(path, "r");
  if (fp == NULL) {
    int saved = errno;
    g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(saved),
                "cannot be opened: %s", g_strerror(saved));
    return NULL;
  }
  g_autoptr(GPtrArray) sections =
      g_ptr_array_new_with_free_func((GDestroyNotify)config_section_free);
  /* The buffers and the sscanf() patterns are QEMU's own, so that a line is
   * split, matched and refused exactly where QEMU does it: a key matched
   * before a failed '= "' still counts (as a key with an empty value). */
  char line[1024], group[64], arg[64], value[1024];
  ConfigSection *current = NULL;
  guint lno = 0;
  while (fgets(line, sizeof(line), fp) != NULL) {
    ++lno;
    if (line[0] == '\n' || line[0] == '#')
      continue;
    if (line[0] == '[') {
      if (sscanf(line, "[%63s \"%63[^\"]\"]", group, value) == 2) {
        current = section_new(group, value, lno);
        g_ptr_array_add(sections, current);
        continue;
      }
      if (sscanf(line, "[%63[^]]]", group) == 1) {
        current = section_new(group, NULL, lno);
        g_ptr_array_add(sections, current);
        continue;
      }
    }
    value[0] = '\0';
    if (sscanf(line, " %63s = \"%1023[^\"]\"", arg, value) == 2 ||
        sscanf(line, " %63s = \"\"", arg) == 1) {
      if (current == NULL) {
        g_set_error(error, QP_ARGS_ERROR, QP_ARGS_ERROR_INVALID,
                    "-readconfig %s:%u: no group defined: a key needs a "
                    "[group] line above it",
                    path, lno);
        return NULL;
      }
      g_ptr_array_add(current->keys, g_strdup(arg));
      g_ptr_array_add(current->values, g_strdup(value));
      continue;
    }
    g_set_error(error, QP_ARGS_ERROR, QP_ARGS_ERROR_INVALID,
                "-readconfig %s:%u: parse error: expected [group], "
                "key = \"value\", an empty line or a # comment",
                path, lno);
    return NULL;
  }
  if (ferror(fp)) {
    int saved = errno;
    g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(saved),
                "cannot be read: %s", g_strerror(saved));
    return NULL;
  }
  return g_steal_pointer(&sections);
}

/* The option a -readconfig section stands for, as QEMU 7.2 treats it:
 * [machine] merges into -machine, [smp-opts] into -smp, [memory] is -m,
 * [numa] -numa, [object "ID"] -object and [device "ID"] -device. Sections
 * that do not matter to placement give NULL. */
static const char *
section_option(const ConfigSection *section)
{
  static const char *const map[][2] = {
      {"machine", "machine"}, {"smp-opts", "smp"},  {"memory", "m"},
      {"numa", "numa"},       {"object", "object"}, {"device", "device"},
  };
  for (guint k = 0; k < G_N_ELEMENTS(map); k++)
    if (strcmp(section->group, map[k][0]) == 0)
      return map[k][1];
  return NULL;
}

/* KEY of a section as the command line's option spells it. QEMU 7.2 reads
 * an [object] section with the keyval visitor, whose lists are dotted
 * keys: Incus writes 'host-nodes.0 = "1"'. The command line's -object
 * (QemuOpts) gives the same list as 'host-nodes=1', repeated for more. */
static const char *
section_key(const ConfigSection *section, const char *key)
{
  static const char list[] = "host-nodes.";
  if (strcmp(section->group, "object") != 0 ||
      strncmp(key, list, sizeof(list) - 1) != 0)
    return key;
  const char *index = key + sizeof(list) - 1;
  if (*index == '\0' || strspn(index, "0123456789") != strlen(index))
    return key;
  return "host-nodes";
}

void
qp_readconfig_name_source(GPtrArray *file_values, GError **error)
{
  GPtrArray *v = file_values;
  for (guint k = 0; error != NULL && *error != NULL && k + 1 < v->len; k += 2)
    if (strstr((*error)->message, v->pdata[k]) != NULL) {
      g_prefix_error(error, "-readconfig %s: ", (char *)v->pdata[k + 1]);
      return;
    }
}

GArray *
qp_readconfig_expand(GArray *opts, GPtrArray *file_values, GPtrArray *warnings,
                     GError **error)
{
  g_autoptr(GArray) all = g_array_new(FALSE, TRUE, sizeof(QpOpt));
  for (guint i = 0; i < opts->len; i++) {
    const QpOpt *o = &g_array_index(opts, QpOpt, i);
    g_array_append_val(all, *o);
    if (!qp_opt_is(o, "readconfig"))
      continue;
    g_autoptr(GError) local = NULL;
    g_autoptr(GPtrArray) sections = readconfig_read(o->value, &local);
    if (sections == NULL && local->domain == QP_ARGS_ERROR) {
      g_propagate_error(error, g_steal_pointer(&local));
      return NULL;
    }
    if (sections == NULL) {
      g_ptr_array_add(warnings,
                      g_strdup_printf("-readconfig %s %s: what it holds is "
                                      "not planned for",
                                      o->value, local->message));
      continue;
    }
    for (guint k = 0; k < sections->len; k++) {
      const ConfigSection *sec = g_ptr_array_index(sections, k);
      const char *name = section_option(sec);
      if (name == NULL)
        continue;
      GString *v = g_string_new(NULL);
      if (sec->id != NULL)
        qp_kv_append(v, "id", sec->id);
      for (guint j = 0; j < sec->keys->len; j++)
        qp_kv_append(v, section_key(sec, sec->keys->pdata[j]),
                     sec->values->pdata[j]);
      char *value = g_string_free(v, FALSE);
      g_ptr_array_add(file_values, value);
      g_ptr_array_add(file_values, g_strdup_printf("%s:%u [%s]", o->value,
                                                   sec->line, sec->group));
      QpOpt f = {.name = name,
                 .i = QP_ARGI_IN_FILE,
                 .value = value,
                 .vi = QP_ARGI_IN_FILE};
      g_array_append_val(all, f);
    }
  }
  return g_steal_pointer(&all);
}
