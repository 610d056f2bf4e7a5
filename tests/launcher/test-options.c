/* qemu-pin's own settings: command line > environment > the VM's config
 * group > [defaults], and one-line errors naming file, line and key. */
#include <string.h>
#include <unistd.h>

#include "launcher/launch.h"
#include "launcher/options.h"
#include "launcher/qemu/args.h"
#include "launcher/qemu/vm-ids.h"
#include "topology/base/cpulist.h"

static char *
write_config(const char *text)
{
  GError *error = NULL;
  char *path = NULL;
  int fd = g_file_open_tmp("qp-conf-XXXXXX", &path, &error);
  g_assert_no_error(error);
  close(fd);
  g_file_set_contents(path, text, -1, &error);
  g_assert_no_error(error);
  return path;
}

static QpVmIds *
qemu_args(const char *const *argv)
{
  return qp_vm_ids_from_argv(g_strv_length((char **)argv), (char **)argv);
}

static const char config[] = "# qemu-pin.conf\n"
                             "[defaults]\n"
                             "mode = balanced\n"
                             "affinity = 0-7\n"
                             "reserve-mib = 1024\n"
                             "\n"
                             "[name:web]\n"
                             "mode = numa\n"
                             "hostnodes = 1\n"
                             "[uuid:6A1E1F2C-0000-4000-8000-000000000001]\n"
                             "strategy = pack\n"
                             "[id:105]\n"
                             "mode = one-to-one\n"
                             "smt = strict\n";

static char *
list(hwloc_const_bitmap_t set)
{
  return set ? qp_list_format(set) : g_strdup("(unset)");
}

static void
test_precedence(void)
{
  g_autofree char *path = write_config(config);
  const char *argv[] = {"-name", "guest=web,debug-threads=on", "-uuid",
                        "6a1e1f2c-0000-4000-8000-000000000001", NULL};
  g_autoptr(QpVmIds) args = qemu_args(argv);
  g_unsetenv("QEMU_PIN_MODE");
  g_setenv("QEMU_PIN_AFFINITY", "2-3", TRUE);

  /* The VM group beats [defaults]; the environment beats both. */
  QpOptions o;
  qp_options_init(&o);
  char *cli[] = {"qemu-pin", "--config", path, "qemu-system-x86_64", NULL};
  int qi = 0;
  GError *error = NULL;
  g_assert_true(qp_options_parse_cli(&o, 4, cli, TRUE, &qi, &error));
  g_assert_cmpint(qi, ==, 3);
  g_assert_true(qp_options_parse_env(&o, &error));
  g_assert_true(qp_options_load_config(&o, args, &error));
  g_assert_no_error(error);
  g_assert_cmpint(o.placement.mode, ==, QP_MODE_NUMA);         /* [name:web] */
  g_assert_cmpint(o.placement.strategy, ==, QP_STRATEGY_PACK); /* [uuid:...] */
  g_autofree char *aff = list(o.placement.affinity);
  g_assert_cmpstr(aff, ==, "2-3"); /* env */
  g_autofree char *hn = list(o.placement.hostnodes);
  g_assert_cmpstr(hn, ==, "1");
  g_assert_cmpuint(o.placement.reserve_mib, ==, 1024); /* defaults */
  qp_options_clear(&o);

  /* The command line beats the environment. */
  qp_options_init(&o);
  char *cli2[] = {"qemu-pin",           "--config", path,
                  "--affinity=5",       "--mode",   "none",
                  "qemu-system-x86_64", NULL};
  g_assert_true(qp_options_parse_cli(&o, 7, cli2, TRUE, &qi, &error));
  g_assert_true(qp_options_parse_env(&o, &error));
  g_assert_true(qp_options_load_config(&o, args, &error));
  g_assert_no_error(error);
  g_autofree char *aff2 = list(o.placement.affinity);
  g_assert_cmpstr(aff2, ==, "5");
  g_assert_cmpint(o.placement.mode, ==, QP_MODE_NONE);
  qp_options_clear(&o);
  g_unsetenv("QEMU_PIN_AFFINITY");
  unlink(path);
}

/* -v, -vv, -vvv: a level for each v (the man page: repeat for more). */
static void
test_verbose_levels(void)
{
  static const struct {
    const char *arg;
    int level;
  } rows[] = {{"-v", 1}, {"-vv", 2}, {"-vvv", 3}, {"--verbose", 1}};
  for (gsize i = 0; i < G_N_ELEMENTS(rows); i++) {
    QpOptions o;
    qp_options_init(&o);
    char *cli[] = {"qemu-pin", (char *)rows[i].arg, "-v", "qemu", NULL};
    int qi = 0;
    g_autoptr(GError) error = NULL;
    g_assert_true(qp_options_parse_cli(&o, 4, cli, TRUE, &qi, &error));
    g_assert_cmpint(o.verbose, ==, rows[i].level + 1);
    g_assert_cmpint(qi, ==, 3);
    qp_options_clear(&o);
  }
  QpOptions o;
  qp_options_init(&o);
  char *bad[] = {"qemu-pin", "-vx", "qemu", NULL};
  int qi = 0;
  g_autoptr(GError) error = NULL;
  g_assert_false(qp_options_parse_cli(&o, 3, bad, TRUE, &qi, &error));
  g_assert_nonnull(strstr(error->message, "'-vx'"));
  qp_options_clear(&o);
}

/* O (initialized here; qp_options_clear() it) with the config file TEXT,
 * given explicitly, loaded: it must load. */
static void
load_config_text(QpOptions *o, const char *text)
{
  g_autofree char *path = write_config(text);
  qp_options_init(o);
  o->config = g_strdup(path);
  o->config_explicit = TRUE;
  g_autoptr(GError) error = NULL;
  g_assert_true(qp_options_load_config(o, NULL, &error));
  g_assert_no_error(error);
  unlink(path);
}

/* Blanks at the end of a value (GKeyFile keeps them) are not part of it. */
static void
test_trailing_blanks(void)
{
  QpOptions o;
  load_config_text(&o, "[defaults]\nmode = balanced \nreserve-mib=512\t\n");
  g_assert_cmpint(o.placement.mode, ==, QP_MODE_BALANCED);
  g_assert_cmpuint(o.placement.reserve_mib, ==, 512);
  qp_options_clear(&o);
}

/* Lines starting with ; are comments, as qemu-pin.conf(5) says (outside
 * check, stop 43: GKeyFile refused them, and every launch with them). */
static void
test_semicolon_comments(void)
{
  QpOptions o;
  load_config_text(&o,
                   "; the host's defaults\n[defaults]\n  ; indented\nmode = "
                   "balanced\n;mode = none\nreserve-mib = 256\n");
  g_assert_cmpint(o.placement.mode, ==, QP_MODE_BALANCED);
  g_assert_cmpuint(o.placement.reserve_mib, ==, 256);
  qp_options_clear(&o);
}

/* A disk file traced to its PCI device through this machine's sysfs: on a
 * recorded host (--topology) that address would name another device, so
 * it is forgotten (outside check, stop 43: a local controller's address
 * matched an NVMe drive of the recorded host, and its iothread went
 * there). */
static void
test_topology_forgets_local_devices(void)
{
  g_autofree char *file =
      g_build_filename(g_get_tmp_dir(), "qp-dev-XXXXXX", NULL);
  int fd = g_mkstemp(file);
  g_assert_cmpint(fd, >=, 0);
  close(fd);
  g_autofree char *drive =
      g_strdup_printf("if=none,id=d0,file=%s,format=raw", file);
  char *argv[] = {"-drive", drive, "-device", "virtio-blk-pci,drive=d0", NULL};
  QpOptions o;
  qp_options_init(&o);
  g_autoptr(GError) error = NULL;
  g_autoptr(QpQemuArgs) here = qp_launch_read(&o, 4, argv, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(here->req->io->len, ==, 1);
  const QpIoDevice *d = here->req->io->pdata[0];
  if (d->bdf == NULL) {
    unlink(file);
    qp_options_clear(&o);
    g_test_skip("the temporary directory is on no PCI device here");
    return;
  }
  o.topology = g_strdup("/any/recorded-host.xml");
  g_autoptr(QpQemuArgs) there = qp_launch_read(&o, 4, argv, &error);
  g_assert_no_error(error);
  g_assert_null(((const QpIoDevice *)there->req->io->pdata[0])->bdf);
  unlink(file);
  qp_options_clear(&o);
}

static void
test_proxmox_id_group(void)
{
  g_autofree char *path = write_config(config);
  const char *argv[] = {"-id", "105", "-name", "vm105", NULL};
  g_autoptr(QpVmIds) args = qemu_args(argv);
  QpOptions o;
  qp_options_init(&o);
  g_setenv("QEMU_PIN_CONFIG", path, TRUE);
  GError *error = NULL;
  g_assert_true(qp_options_parse_env(&o, &error));
  g_assert_true(qp_options_load_config(&o, args, &error));
  g_assert_no_error(error);
  g_assert_cmpint(o.placement.mode, ==, QP_MODE_ONE_TO_ONE);
  g_assert_cmpint(o.placement.smt, ==, QP_SMT_STRICT);
  g_assert_cmpint(o.placement.strategy, ==,
                  QP_STRATEGY_SPREAD); /* not vm105's uuid */
  qp_options_clear(&o);
  g_unsetenv("QEMU_PIN_CONFIG");
  unlink(path);
}

typedef struct {
  const char *text;
  const char *needles[4]; /* the one line names these */
} BadConfig;

static const BadConfig bad_configs[] = {
    {"[defaults]\nmode = fast\n", {":2:", "mode", "'fast'", "one-to-one"}},
    {"[defaults]\n\nmodez = numa\n",
     {":3:", "unknown key 'modez'", "[defaults]", NULL}},
    {"[defaults]\naffinity = 3-1\n", {":2:", "affinity", "'3-1'", NULL}},
    {"[vm1]\nmode = numa\n", {":1:", "unknown group [vm1]", NULL}},
    {"[defaults]\nthis is not a setting\n",
     {":2:", "'this is not a setting'", NULL}},
    {"[name:x]\nreserve-mib = -5\n", {":2:", "reserve-mib", "'-5'", NULL}},
    {"[defaults]\nconfig = /x\n", {":2:", "unknown key 'config'", NULL}},
    /* Outside check, stop 42: accepted silently, or by the caller's LANG. */
    {"[defaults]\nmode[de] = fast\n", {":2:", "'mode[de]'", "[locale]", NULL}},
    {"[id:abc]\nmode = none\n", {":1:", "[id:abc]", "a number", NULL}},
    {"[uuid:notauuid]\nmode = none\n",
     {":1:", "[uuid:notauuid]", "UUID", NULL}},
    {"[name:]\nmode = none\n", {":1:", "[name:]", "a VM name", NULL}},
    {"[defaults]\nnode-reserve-mib = 0:100000,0:1\n",
     {":2:", "'0:100000,0:1'", "each node once", NULL}},
};

static void
test_bad_config(gconstpointer data)
{
  const BadConfig *c = data;
  g_autofree char *path = write_config(c->text);
  QpOptions o;
  qp_options_init(&o);
  o.config = g_strdup(path);
  o.config_explicit = TRUE;
  g_autoptr(GError) error = NULL;
  g_assert_false(qp_options_load_config(&o, NULL, &error));
  g_assert_nonnull(error);
  g_test_message("%s", error->message);
  g_assert_null(strchr(error->message, '\n'));
  g_assert_nonnull(strstr(error->message, path));
  for (guint i = 0; i < G_N_ELEMENTS(c->needles) && c->needles[i]; i++)
    g_assert_nonnull(strstr(error->message, c->needles[i]));
  qp_options_clear(&o);
  unlink(path);
}

static void
test_missing_config(void)
{
  QpOptions o;
  qp_options_init(&o);
  g_autoptr(GError) error = NULL;
  /* The default file may be absent; an explicit one may not. */
  g_assert_true(qp_options_load_config(&o, NULL, &error) ||
                g_file_test(QP_DEFAULT_CONFIG, G_FILE_TEST_EXISTS));
  o.config = g_strdup("/nonexistent/qemu-pin.conf");
  o.config_explicit = TRUE;
  g_assert_false(qp_options_load_config(&o, NULL, &error));
  g_assert_nonnull(strstr(error->message, "/nonexistent/qemu-pin.conf"));
  qp_options_clear(&o);
}

static void
test_bad_env(void)
{
  const char *rows[][3] = {
      {"QEMU_PIN_MODE", "bogus", "'bogus'"},
      {"QEMU_PIN_AFFINITY", "0-", "'0-'"},
      {"QEMU_PIN_QMP_TIMEOUT", "0", "'0'"},
      {"QEMU_PIN_DRY_RUN", "maybe", "'maybe'"},
  };
  for (gsize i = 0; i < G_N_ELEMENTS(rows); i++) {
    QpOptions o;
    qp_options_init(&o);
    g_setenv(rows[i][0], rows[i][1], TRUE);
    g_autoptr(GError) error = NULL;
    g_assert_false(qp_options_parse_env(&o, &error));
    g_assert_nonnull(strstr(error->message, rows[i][0]));
    g_assert_nonnull(strstr(error->message, rows[i][2]));
    g_unsetenv(rows[i][0]);
    qp_options_clear(&o);
  }
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/options/precedence/cli-env-vm-group-defaults",
                  test_precedence);
  g_test_add_func("/options/config/matches-proxmox-id", test_proxmox_id_group);
  g_test_add_func("/options/cli/verbose-levels", test_verbose_levels);
  g_test_add_func("/options/config/trailing-blanks", test_trailing_blanks);
  g_test_add_func("/options/topology-forgets-local-devices",
                  test_topology_forgets_local_devices);
  g_test_add_func("/options/config/semicolon-comments",
                  test_semicolon_comments);
  for (gsize i = 0; i < G_N_ELEMENTS(bad_configs); i++) {
    g_autofree char *p = g_strdup_printf("/options/config/bad/%zu", i);
    g_test_add_data_func(p, &bad_configs[i], test_bad_config);
  }
  g_test_add_func("/options/config/missing-explicit-file-is-an-error",
                  test_missing_config);
  g_test_add_func("/options/env/bad-values-name-variable-and-value",
                  test_bad_env);
  return g_test_run();
}
