/* Users' and groups' names and numbers, for the ledger's directory and its
 * messages. The full program asks the C library (NSS: /etc files, systemd,
 * LDAP, whatever nsswitch.conf names). The statically linked launcher
 * (launcher/front/main.c) must not: a static C library loads NSS modules
 * built for the shared one, and a lookup that reaches one (a name /etc
 * does not have, with "systemd" in nsswitch.conf) crashes. It reads
 * /etc/passwd and /etc/group itself after qp_accounts_files_only(). */
#pragma once

#include <glib.h>
#include <sys/types.h>

G_BEGIN_DECLS

/* From now on, passwd and group in ETC (NULL: /etc) only. */
void qp_accounts_files_only(const char *etc);

/* The group NAME's number: FALSE when there is no such group. */
gboolean qp_group_gid(const char *name, gid_t *gid);

/* The name of group GID, else its number: a new string. */
char *qp_group_label(gid_t gid);

/* The name of user UID, else "uid UID": a new string. */
char *qp_user_label(uid_t uid);

G_END_DECLS
