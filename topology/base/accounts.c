/* Users' and groups' names (accounts.h). */
#include "topology/base/accounts.h"

#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static gboolean files_only;
static char *etc_dir; /* NULL: /etc */

void
qp_accounts_files_only(const char *etc)
{
  files_only = TRUE;
  g_free(etc_dir);
  etc_dir = g_strdup(etc);
}

/* FILE (group, passwd) in the directory files are read from. */
static char *
etc_file(const char *file)
{
  return g_build_filename(etc_dir != NULL ? etc_dir : "/etc", file, NULL);
}

/* The line of FILE (passwd or group: NAME:PASSWORD:ID:...) whose
 * name is NAME, or whose id is ID when NAME is NULL: its name and id. */
static gboolean
files_find(const char *file, const char *name, guint id, char **name_out,
           guint *id_out)
{
  g_autofree char *path = etc_file(file);
  FILE *f = fopen(path, "re");
  if (f == NULL)
    return FALSE;
  char line[4096];
  gboolean found = FALSE;
  while (!found && fgets(line, sizeof line, f) != NULL) {
    char *fields[3];
    char *p = line;
    int n = 0;
    for (; n < 3 && p != NULL; n++) {
      fields[n] = p;
      p = strchr(p, ':');
      if (p != NULL)
        *p++ = '\0';
    }
    if (n < 3 || p == NULL || fields[0][0] == '\0' || fields[0][0] == '+' ||
        fields[0][0] == '-')
      continue;
    char *end = NULL;
    unsigned long v = strtoul(fields[2], &end, 10);
    if (end == fields[2] || *end != '\0' || v > G_MAXUINT)
      continue;
    found = name != NULL ? strcmp(fields[0], name) == 0 : v == id;
    if (found) {
      if (name_out != NULL)
        *name_out = g_strdup(fields[0]);
      if (id_out != NULL)
        *id_out = (guint)v;
    }
  }
  fclose(f);
  return found;
}

gboolean
qp_group_gid(const char *name, gid_t *gid)
{
  if (files_only) {
    guint id = 0;
    if (!files_find("group", name, 0, NULL, &id))
      return FALSE;
    *gid = (gid_t)id;
    return TRUE;
  }
  struct group *gr = getgrnam(name);
  if (gr == NULL)
    return FALSE;
  *gid = gr->gr_gid;
  return TRUE;
}

/* The name of ID in FILE (group or passwd), or NULL. */
static char *
files_name(const char *file, guint id)
{
  char *name = NULL;
  return files_find(file, NULL, id, &name, NULL) ? name : NULL;
}

/* The name of ID: from FILE when reading files only, else NSS (its
 * answer); PREFIX and the number when there is none. */
static char *
label(const char *file, guint id, const char *nss, const char *prefix)
{
  char *name = files_only ? files_name(file, id) : g_strdup(nss);
  return name != NULL ? name : g_strdup_printf("%s%u", prefix, id);
}

char *
qp_group_label(gid_t gid)
{
  struct group *gr = files_only ? NULL : getgrgid(gid);
  return label("group", (guint)gid, gr != NULL ? gr->gr_name : NULL, "");
}

char *
qp_user_label(uid_t uid)
{
  struct passwd *pw = files_only ? NULL : getpwuid(uid);
  return label("passwd", (guint)uid, pw != NULL ? pw->pw_name : NULL, "uid ");
}
