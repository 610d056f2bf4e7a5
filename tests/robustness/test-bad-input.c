/* Bad input through the real qemu-pin with real QEMU as its target: each row
 * is a malformed QEMU option (one QEMU 7.2 refuses too: a row of
 * tests/common/qemu-refusals.c), qemu-pin option, environment value or config
 * file. Each must give exactly one line on stderr naming the bad value (and
 * for config files the file, line and key), a non-zero exit status, no QEMU
 * run (the QEMU binary is a wrapper that leaves a file behind when it runs,
 * and no process has the test's marker in its command line), and nothing in
 * the ledger directory. */
#include <string.h>
#include <unistd.h>

#include "tests/common/qemu-refusals.h"
#include "tests/robustness/rb-common.h"

typedef enum {
  PREFIX,  /* qemu-pin [OPTS] -- QEMU ARGS */
  DROP_IN, /* qemu-pin linked as qemu-system-x86_64, QEMU_PIN_QEMU=wrapper */
} Face;

typedef struct {
  const char *path;
  Face face;
  const char *opts[4];  /* qemu-pin's options */
  const char *qemu[12]; /* QEMU arguments after the common ones */
  const char *env[3];   /* NAME=VALUE */
  const char *config;   /* text of a --config file (written to DIR/bad.conf) */
  int config_line;      /* the line the message must name (config rows) */
  int status;           /* expected exit status */
  const char *want[4];  /* substrings of the line */
} Row;

#define SMP2 "-smp", "2", "-m", "64"

static const Row rows[] = {
    /* -smp */
    {"/bad-input/smp/maxcpus-below-cpus",
     PREFIX,
     {NULL},
     {"-smp", "4,maxcpus=2", NULL},
     {NULL},
     NULL,
     0,
     1,
     {"-smp '4,maxcpus=2'", "at least cpus"}},
    {"/bad-input/smp/negative",
     PREFIX,
     {NULL},
     {"-smp", "-1", NULL},
     {NULL},
     NULL,
     0,
     1,
     {"-smp '-1'", "positive integer"}},
    {"/bad-input/smp/topology-mismatch",
     PREFIX,
     {NULL},
     {"-smp", "4,sockets=3,cores=1", NULL},
     {NULL},
     NULL,
     0,
     1,
     {"-smp '4,sockets=3,cores=1'", "does not equal"}},
    {"/bad-input/smp/too-many",
     PREFIX,
     {NULL},
     {"-smp", "cpus=99999", NULL},
     {NULL},
     NULL,
     0,
     1,
     {"-smp 'cpus=99999'", "maximum"}},
    {"/bad-input/smp/machine-smp-topology",
     PREFIX,
     {NULL},
     {"-machine", "q35,smp.cpus=4,smp.sockets=3,smp.cores=1", NULL},
     {NULL},
     NULL,
     0,
     1,
     {"smp.sockets=3", "does not equal"}},
    /* -m */
    {"/bad-input/m/slots-without-maxmem",
     PREFIX,
     {NULL},
     {"-m", "64,slots=2", NULL},
     {NULL},
     NULL,
     0,
     1,
     {"-m '64,slots=2'", "maxmem"}},
    {"/bad-input/m/unknown-suffix",
     PREFIX,
     {NULL},
     {"-m", "4Q", NULL},
     {NULL},
     NULL,
     0,
     1,
     {"-m '4Q'", "suffix"}},
    {"/bad-input/m/overflow",
     PREFIX,
     {NULL},
     {"-m", "99999999999999999999", NULL},
     {NULL},
     NULL,
     0,
     1,
     {"99999999999999999999", "64 bits"}},
    {"/bad-input/m/overflow-with-suffix",
     PREFIX,
     {NULL},
     {"-m", "17179869184T", NULL},
     {NULL},
     NULL,
     0,
     1,
     {"17179869184T"}},
    /* -numa */
    {"/bad-input/numa/dist-unknown-node",
     PREFIX,
     {NULL},
     {SMP2, "-numa", "node,nodeid=0,cpus=0-1", "-numa",
      "dist,src=0,dst=5,val=20", NULL},
     {NULL},
     NULL,
     0,
     1,
     {"dist,src=0,dst=5,val=20", "node 5"}},
    {"/bad-input/numa/cpu-unknown-node",
     PREFIX,
     {NULL},
     {SMP2, "-numa", "node,nodeid=0,cpus=0-1", "-numa",
      "cpu,node-id=3,socket-id=0", NULL},
     {NULL},
     NULL,
     0,
     1,
     {"cpu,node-id=3,socket-id=0", "node 3"}},
    {"/bad-input/numa/cpu-out-of-range",
     PREFIX,
     {NULL},
     {SMP2, "-numa", "node,nodeid=0,cpus=0-5", NULL},
     {NULL},
     NULL,
     0,
     1,
     {"cpus=0-5", "vCPU 5"}},
    {"/bad-input/numa/overlapping-cpus",
     PREFIX,
     {NULL},
     {SMP2, "-numa", "node,nodeid=0,cpus=0-1", "-numa", "node,nodeid=1,cpus=1",
      NULL},
     {NULL},
     NULL,
     0,
     1,
     {"node,nodeid=1,cpus=1", "already assigned"}},
    {"/bad-input/numa/missing-memdev",
     PREFIX,
     {NULL},
     {SMP2, "-numa", "node,nodeid=0,cpus=0-1,memdev=nope", NULL},
     {NULL},
     NULL,
     0,
     1,
     {"memdev=nope", "'nope'"}},
    /* JSON -object */
    {"/bad-input/object/json-truncated",
     PREFIX,
     {NULL},
     {SMP2, "-object",
      "{\"qom-type\":\"memory-backend-ram\",\"id\":\"m0\",\"size\":", NULL},
     {NULL},
     NULL,
     0,
     1,
     {"\"id\":\"m0\",\"size\":'", "not valid JSON"}},
    {"/bad-input/object/json-size-string",
     PREFIX,
     {NULL},
     {SMP2, "-object",
      "{\"qom-type\":\"memory-backend-ram\",\"id\":\"m0\",\"size\":\"big\"}",
      NULL},
     {NULL},
     NULL,
     0,
     1,
     {"\"size\":\"big\"", "'size'"}},
    {"/bad-input/object/json-qom-type-number",
     PREFIX,
     {NULL},
     {SMP2, "-object", "{\"qom-type\":5,\"id\":\"m0\"}", NULL},
     {NULL},
     NULL,
     0,
     1,
     {"{\"qom-type\":5,\"id\":\"m0\"}", "'qom-type'"}},
    {"/bad-input/object/json-host-nodes-string",
     PREFIX,
     {NULL},
     {SMP2, "-object",
      "{\"qom-type\":\"memory-backend-ram\",\"id\":\"m0\",\"size\":67108864,"
      "\"host-nodes\":\"zero\"}",
      NULL},
     {NULL},
     NULL,
     0,
     1,
     {"\"host-nodes\":\"zero\"", "host-nodes"}},
    {"/bad-input/object/keyvalue-size",
     PREFIX,
     {NULL},
     {SMP2, "-object", "memory-backend-ram,id=m0,size=lots", NULL},
     {NULL},
     NULL,
     0,
     1,
     {"size=lots", "'lots'"}},
    /* CPU and node lists */
    {"/bad-input/affinity/open-range",
     PREFIX,
     {"--affinity=0-"},
     {SMP2, NULL},
     {NULL},
     NULL,
     0,
     2,
     {"--affinity '0-'", "0-3,8"}},
    {"/bad-input/affinity/descending",
     PREFIX,
     {"--affinity=3-1"},
     {SMP2, NULL},
     {NULL},
     NULL,
     0,
     2,
     {"--affinity '3-1'", "ascending"}},
    {"/bad-input/affinity/letter",
     PREFIX,
     {"--affinity=a"},
     {SMP2, NULL},
     {NULL},
     NULL,
     0,
     2,
     {"--affinity 'a'"}},
    {"/bad-input/affinity/too-large",
     PREFIX,
     {"--affinity=99999"},
     {SMP2, NULL},
     {NULL},
     NULL,
     0,
     2,
     {"--affinity '99999'", "8191"}},
    {"/bad-input/affinity/empty",
     PREFIX,
     {"--affinity="},
     {SMP2, NULL},
     {NULL},
     NULL,
     0,
     2,
     {"--affinity", "empty"}},
    {"/bad-input/hostnodes/open-range",
     PREFIX,
     {"--hostnodes=0-"},
     {SMP2, NULL},
     {NULL},
     NULL,
     0,
     2,
     {"--hostnodes '0-'"}},
    {"/bad-input/hostnodes/descending",
     PREFIX,
     {"--hostnodes=3-1"},
     {SMP2, NULL},
     {NULL},
     NULL,
     0,
     2,
     {"--hostnodes '3-1'"}},
    {"/bad-input/hostnodes/letter",
     PREFIX,
     {"--hostnodes", "a"},
     {SMP2, NULL},
     {NULL},
     NULL,
     0,
     2,
     {"--hostnodes 'a'"}},
    {"/bad-input/hostnodes/too-large",
     PREFIX,
     {"--hostnodes=99999"},
     {SMP2, NULL},
     {NULL},
     NULL,
     0,
     2,
     {"--hostnodes '99999'"}},
    {"/bad-input/hostnodes/empty",
     PREFIX,
     {"--hostnodes="},
     {SMP2, NULL},
     {NULL},
     NULL,
     0,
     2,
     {"--hostnodes", "empty"}},
    /* qemu-pin's other options */
    {"/bad-input/option/mode",
     PREFIX,
     {"--mode=sideways"},
     {SMP2, NULL},
     {NULL},
     NULL,
     0,
     2,
     {"'sideways'", "one-to-one"}},
    {"/bad-input/option/unknown",
     PREFIX,
     {"--frobnicate=1"},
     {SMP2, NULL},
     {NULL},
     NULL,
     0,
     2,
     {"--frobnicate=1"}},
    /* Another command's output option: a launch that ignored it ran the
     * VM its caller meant only to see planned (outside check, stop 42). */
    {"/bad-input/option/launch-with-human",
     PREFIX,
     {"--human"},
     {SMP2, NULL},
     {NULL},
     NULL,
     0,
     2,
     {"'--human'", "qemu-pin plan", "not for a launch"}},
    {"/bad-input/option/launch-with-json",
     PREFIX,
     {"--json"},
     {SMP2, NULL},
     {NULL},
     NULL,
     0,
     2,
     {"'--json'", "qemu-pin plan, topology", "not for a launch"}},
    {"/bad-input/option/launch-with-metrics",
     PREFIX,
     {"--metrics"},
     {SMP2, NULL},
     {NULL},
     NULL,
     0,
     2,
     {"'--metrics'", "qemu-pin status", "not for a launch"}},
    {"/bad-input/option/launch-with-prune",
     PREFIX,
     {"--prune"},
     {SMP2, NULL},
     {NULL},
     NULL,
     0,
     2,
     {"'--prune'", "qemu-pin status", "not for a launch"}},
    {"/bad-input/option/launch-with-picture",
     PREFIX,
     {"--picture=vm.png"},
     {SMP2, NULL},
     {NULL},
     NULL,
     0,
     2,
     {"'--picture'", "qemu-pin status", "not for a launch"}},
    /* A launch on a recorded host pinned to CPUs this one may not have
     * (outside check, stop 43). */
    {"/bad-input/option/launch-with-topology",
     PREFIX,
     {"--topology=/nonexistent-dir/host.xml"},
     {SMP2, NULL},
     {NULL},
     NULL,
     0,
     2,
     {"'--topology'", "QEMU_PIN_TOPOLOGY", "not for a launch"}},
    /* Its environment twin, which a launch read after that check and
     * planned on the recorded host: pinned to CPUs 20-23 of a 2-CPU host
     * (outside check, branch H15). */
    {"/bad-input/option/launch-with-topology-env",
     PREFIX,
     {NULL},
     {SMP2, NULL},
     {"QEMU_PIN_TOPOLOGY=/nonexistent-dir/host.xml", NULL},
     NULL,
     0,
     2,
     {"'--topology'", "QEMU_PIN_TOPOLOGY", "not for a launch"}},
    {"/bad-input/drop-in/launch-with-topology-env",
     DROP_IN,
     {NULL},
     {SMP2, NULL},
     {"QEMU_PIN_TOPOLOGY=/nonexistent-dir/host.xml", NULL},
     NULL,
     0,
     2,
     {"'--topology'", "QEMU_PIN_TOPOLOGY", "not for a launch"}},
    {"/bad-input/option/topology-file-missing",
     PREFIX,
     {"--dry-run", "--topology=/nonexistent-dir/host.xml"},
     {SMP2, NULL},
     {NULL},
     NULL,
     0,
     2,
     {"/nonexistent-dir/host.xml", "no such file", "lstopo --of xml"}},
    {"/bad-input/option/qmp-timeout-zero",
     PREFIX,
     {"--qmp-timeout=0"},
     {SMP2, NULL},
     {NULL},
     NULL,
     0,
     2,
     {"--qmp-timeout", "'0'"}},
    {"/bad-input/option/node-reserve",
     PREFIX,
     {"--node-reserve-mib=0:x"},
     {SMP2, NULL},
     {NULL},
     NULL,
     0,
     2,
     {"'0:x'", "NODE:MIB"}},
    /* Config files */
    {"/bad-input/config/syntax",
     PREFIX,
     {NULL},
     {SMP2, NULL},
     {NULL},
     "[defaults]\nmode = numa\nthis is wrong\n",
     3,
     2,
     {"'this is wrong'"}},
    {"/bad-input/config/unclosed-group",
     PREFIX,
     {NULL},
     {SMP2, NULL},
     {NULL},
     "# qemu-pin\n[defaults\nmode = numa\n",
     2,
     2,
     {"'[defaults'"}},
    {"/bad-input/config/unknown-key",
     PREFIX,
     {NULL},
     {SMP2, NULL},
     {NULL},
     "[defaults]\nmode = numa\n\nfrobnicate = 3\n",
     4,
     2,
     {"'frobnicate'", "[defaults]"}},
    {"/bad-input/config/unknown-group",
     PREFIX,
     {NULL},
     {SMP2, NULL},
     {NULL},
     "[defaults]\nmode = numa\n[vm:foo]\nmode = numa\n",
     3,
     2,
     {"[vm:foo]"}},
    {"/bad-input/config/wrong-type",
     PREFIX,
     {NULL},
     {SMP2, NULL},
     {NULL},
     "[defaults]\nqmp-timeout = fast\n",
     2,
     2,
     {"qmp-timeout", "'fast'"}},
    {"/bad-input/config/wrong-value",
     PREFIX,
     {NULL},
     {SMP2, NULL},
     {NULL},
     "[defaults]\nstrategy = spread\nmode = sideways\n",
     3,
     2,
     {"mode", "'sideways'"}},
    {"/bad-input/config/bad-list",
     PREFIX,
     {NULL},
     {SMP2, NULL},
     {NULL},
     "[defaults]\nmode = numa\n\n[name:other]\naffinity = 3-1\n",
     5,
     2,
     {"affinity", "'3-1'"}},
    {"/bad-input/config/cli-only-key",
     PREFIX,
     {NULL},
     {SMP2, NULL},
     {NULL},
     "[defaults]\ntopology = /tmp/x.xml\n",
     2,
     2,
     {"'topology'"}},
    {"/bad-input/config/bool",
     PREFIX,
     {NULL},
     {SMP2, NULL},
     {NULL},
     "[defaults]\nvnuma = maybe\n",
     2,
     2,
     {"vnuma", "'maybe'"}},
    /* Environment */
    {"/bad-input/env/mode",
     PREFIX,
     {NULL},
     {SMP2, NULL},
     {"QEMU_PIN_MODE=bogus", NULL},
     NULL,
     0,
     2,
     {"QEMU_PIN_MODE", "'bogus'"}},
    {"/bad-input/env/affinity",
     PREFIX,
     {NULL},
     {SMP2, NULL},
     {"QEMU_PIN_AFFINITY=3-1", NULL},
     NULL,
     0,
     2,
     {"QEMU_PIN_AFFINITY", "'3-1'"}},
    {"/bad-input/env/qmp-timeout-zero",
     PREFIX,
     {NULL},
     {SMP2, NULL},
     {"QEMU_PIN_QMP_TIMEOUT=0", NULL},
     NULL,
     0,
     2,
     {"QEMU_PIN_QMP_TIMEOUT", "'0'"}},
    {"/bad-input/env/start-timeout-negative",
     PREFIX,
     {NULL},
     {SMP2, NULL},
     {"QEMU_PIN_START_TIMEOUT=-5", NULL},
     NULL,
     0,
     2,
     {"QEMU_PIN_START_TIMEOUT", "'-5'"}},
    {"/bad-input/env/hostnodes",
     PREFIX,
     {NULL},
     {SMP2, NULL},
     {"QEMU_PIN_HOSTNODES=a", NULL},
     NULL,
     0,
     2,
     {"QEMU_PIN_HOSTNODES", "'a'"}},
    {"/bad-input/env/policy",
     PREFIX,
     {NULL},
     {SMP2, NULL},
     {"QEMU_PIN_POLICY=x", NULL},
     NULL,
     0,
     2,
     {"QEMU_PIN_POLICY", "'x'"}},
    {"/bad-input/env/verbose",
     PREFIX,
     {NULL},
     {SMP2, NULL},
     {"QEMU_PIN_VERBOSE=10", NULL},
     NULL,
     0,
     2,
     {"QEMU_PIN_VERBOSE", "'10'"}},
    {"/bad-input/env/reserve",
     PREFIX,
     {NULL},
     {SMP2, NULL},
     {"QEMU_PIN_RESERVE_MIB=lots", NULL},
     NULL,
     0,
     2,
     {"QEMU_PIN_RESERVE_MIB", "'lots'"}},
    {"/bad-input/env/state-dir-empty",
     PREFIX,
     {NULL},
     {SMP2, NULL},
     {"QEMU_PIN_STATE_DIR=", NULL},
     NULL,
     0,
     2,
     {"QEMU_PIN_STATE_DIR", "''"}},
    {"/bad-input/env/config-missing",
     PREFIX,
     {NULL},
     {SMP2, NULL},
     {"QEMU_PIN_CONFIG=/nonexistent/qemu-pin.conf", NULL},
     NULL,
     0,
     2,
     {"/nonexistent/qemu-pin.conf"}},
    /* The drop-in face: every argument is QEMU's, settings from the
     * environment and the config. */
    {"/bad-input/drop-in/smp-topology",
     DROP_IN,
     {NULL},
     {"-smp", "4,sockets=3,cores=1", NULL},
     {NULL},
     NULL,
     0,
     1,
     {"-smp '4,sockets=3,cores=1'"}},
    {"/bad-input/drop-in/env-mode",
     DROP_IN,
     {NULL},
     {SMP2, NULL},
     {"QEMU_PIN_MODE=bogus", NULL},
     NULL,
     0,
     2,
     {"QEMU_PIN_MODE", "'bogus'"}},
    {"/bad-input/drop-in/config-key",
     DROP_IN,
     {NULL},
     {SMP2, NULL},
     {NULL},
     "[defaults]\nmodes = numa\n",
     2,
     2,
     {"'modes'"}},
    {"/bad-input/drop-in/json-object",
     DROP_IN,
     {NULL},
     {SMP2, "-object", "{\"qom-type\":\"memory-backend-ram\"", NULL},
     {NULL},
     NULL,
     0,
     1,
     {"not valid JSON"}},
};

/* The environment of a row: none of the test's own QEMU_PIN_* settings, the
 * row's ledger, CONFIG as the config file (written to DIR/bad.conf, whose
 * path goes to *CONF) and ENV (NAME=VALUE, NULL-terminated). */
static char **
row_environ(RbFixture *f, const char *config, const char *const *env,
            char **conf)
{
  char **envp = g_get_environ();
  g_auto(GStrv) names = g_listenv();
  for (guint i = 0; names[i] != NULL; i++)
    if (g_str_has_prefix(names[i], "QEMU_PIN_"))
      envp = g_environ_unsetenv(envp, names[i]);
  envp = g_environ_setenv(envp, "QEMU_PIN_STATE_DIR", f->state, TRUE);
  /* The default config must not be read: point at an empty one. */
  *conf = g_build_filename(f->dir, "bad.conf", NULL);
  GError *error = NULL;
  g_file_set_contents(*conf, config ? config : "", -1, &error);
  g_assert_no_error(error);
  envp = g_environ_setenv(envp, "QEMU_PIN_CONFIG", *conf, TRUE);
  for (guint i = 0; env != NULL && env[i] != NULL; i++) {
    g_auto(GStrv) kv = g_strsplit(env[i], "=", 2);
    envp = g_environ_setenv(envp, kv[0], kv[1], TRUE);
  }
  return envp;
}

/* qemu-pin (prefixed with OPTS, or as a drop-in QEMU) and the halting
 * guest named after the fixture's marker. */
static GPtrArray *
row_argv(RbFixture *f, Face face, const char *const *opts, char ***envp)
{
  GPtrArray *argv = g_ptr_array_new_with_free_func(g_free);
  if (face == PREFIX) {
    g_ptr_array_add(argv, g_strdup(qp_test_binary()));
    for (guint i = 0; opts != NULL && opts[i] != NULL; i++)
      g_ptr_array_add(argv, g_strdup(opts[i]));
    g_ptr_array_add(argv, g_strdup("--"));
    g_ptr_array_add(argv, g_strdup(f->qemu));
  } else {
    g_autofree char *bin = g_build_filename(f->dir, "bin", NULL);
    g_autofree char *link = g_build_filename(bin, "qemu-system-x86_64", NULL);
    g_assert_cmpint(g_mkdir_with_parents(bin, 0755), ==, 0);
    g_assert_cmpint(symlink(qp_test_binary(), link), ==, 0);
    *envp = g_environ_setenv(*envp, "QEMU_PIN_QEMU", f->qemu, TRUE);
    g_ptr_array_add(argv, g_strdup(link));
  }
  rb_add_guest_args(f, argv);
  g_ptr_array_add(argv, g_strdup("-name"));
  g_ptr_array_add(argv, g_strdup_printf("%s,debug-threads=on", f->marker));
  return argv;
}

/* Runs ARGV with the QEMU arguments QEMU (NULL-terminated) appended; returns
 * the status and stderr's text in *ERR. */
static int
row_run(RbFixture *f, GPtrArray *argv, const char *const *qemu, char **envp,
        char **err)
{
  for (guint i = 0; qemu[i] != NULL; i++)
    g_ptr_array_add(argv, g_strdup(qemu[i]));
  g_ptr_array_add(argv, NULL);
  int status = rb_run(f, (char **)argv->pdata, envp, 30000, err);
  g_test_message("stderr: %s", *err ? *err : "(none)");
  return status;
}

static void
test_row(RbFixture *f, gconstpointer data)
{
  const Row *row = data;
  g_autofree char *conf = NULL;
  g_auto(GStrv) envp = row_environ(f, row->config, row->env, &conf);
  g_autoptr(GPtrArray) argv = row_argv(f, row->face, row->opts, &envp);
  g_autofree char *err = NULL;
  int status = row_run(f, argv, row->qemu, envp, &err);
  g_assert_cmpint(status, ==, row->status);
  rb_assert_one_line(err);
  for (guint i = 0; row->want[i] != NULL; i++)
    if (strstr(err, row->want[i]) == NULL)
      g_test_fail_printf("the line does not name \"%s\": %s", row->want[i],
                         err);
  /* A QEMU value is refused only as QEMU 7.2 refuses it too. */
  if (row->status == 1 && qp_qemu_refusal_find(err) == NULL)
    g_test_fail_printf("not a refusal QEMU 7.2 gives too: %s", err);
  if (row->config != NULL) {
    g_autofree char *where = g_strdup_printf("%s:%d:", conf, row->config_line);
    if (strstr(err, where) == NULL)
      g_test_fail_printf("the line does not name \"%s\": %s", where, err);
  }
  /* QEMU never ran. */
  g_assert_false(g_file_test(f->ran, G_FILE_TEST_EXISTS));
  rb_assert_nothing_left(f, 2000);
}

/* Mode none, from each place a mode can come from: QEMU runs with the
 * caller's command line whatever it holds, and says itself what is wrong. */
typedef enum { FROM_CLI, FROM_ENV, FROM_NAME, FROM_UUID, FROM_ID } From;

typedef struct {
  const char *path;
  Face face;
  From from;
  const char *qemu[12];
  const char *qemu_says; /* in QEMU's stderr */
} NoneRow;

#define VM_UUID "6b8f2c1e-0c4e-4a8b-9f3d-2d1c0e9a7b55"

static const NoneRow none_rows[] = {
    {"/mode-none/cli/smp-topology",
     PREFIX,
     FROM_CLI,
     {"-smp", "4,sockets=3,cores=1", NULL},
     "product of the hierarchy must match maxcpus"},
    {"/mode-none/cli/missing-argument",
     PREFIX,
     FROM_CLI,
     {"-smp", NULL},
     "-smp: requires an argument"},
    {"/mode-none/env/json-object",
     PREFIX,
     FROM_ENV,
     {SMP2, "-object", "{\"qom-type\":\"memory-backend-ram\"", NULL},
     "JSON parse error"},
    {"/mode-none/config-name/numa-overlap",
     PREFIX,
     FROM_NAME,
     {SMP2, "-numa", "node,nodeid=0,cpus=0-1", "-numa", "node,nodeid=1,cpus=1",
      NULL},
     "CPU is already assigned to node-id: 0"},
    {"/mode-none/config-uuid/drop-in",
     DROP_IN,
     FROM_UUID,
     {"-uuid", VM_UUID, "-m", "64,slots=2", NULL},
     "slots specified but no max-size"},
    /* Proxmox's -id: the real QEMU does not know it, but only QEMU says. */
    {"/mode-none/config-id/drop-in",
     DROP_IN,
     FROM_ID,
     {"-id", "105", "-smp", "2,foo=1", NULL},
     "-id: invalid option"},
};

static void
test_mode_none(RbFixture *f, gconstpointer data)
{
  const NoneRow *row = data;
  const char *opts[] = {"--mode=none", NULL};
  const char *env[] = {"QEMU_PIN_MODE=none", NULL};
  const char *group = row->from == FROM_NAME   ? f->marker
                      : row->from == FROM_UUID ? VM_UUID
                      : row->from == FROM_ID   ? "105"
                                               : NULL;
  g_autofree char *config =
      group == NULL ? NULL
                    : g_strdup_printf("[defaults]\nmode = numa\n[%s:%s]\n"
                                      "mode = none\n",
                                      row->from == FROM_NAME   ? "name"
                                      : row->from == FROM_UUID ? "uuid"
                                                               : "id",
                                      group);
  g_autofree char *conf = NULL;
  g_auto(GStrv) envp =
      row_environ(f, config, row->from == FROM_ENV ? env : NULL, &conf);
  g_autoptr(GPtrArray) argv = row_argv(
      f, row->face, row->from == FROM_CLI && row->face == PREFIX ? opts : NULL,
      &envp);
  g_autofree char *err = NULL;
  int status = row_run(f, argv, row->qemu, envp, &err);
  /* QEMU ran, refused, and its status and words are the caller's. */
  g_assert_true(g_file_test(f->ran, G_FILE_TEST_EXISTS));
  g_assert_cmpint(status, ==, 1);
  g_assert_nonnull(strstr(err, row->qemu_says));
  g_assert_null(strstr(err, "qemu-pin"));
  rb_assert_nothing_left(f, 2000);
}

/* A plan where nothing is planned: its options, QEMU's arguments, and a
 * word of its one reason. */
typedef struct {
  const char *opts[3];
  const char *args[4];
  const char *reason;
} PlanNone;

/* plan --mode=none reads no QEMU argument: it prints the mode, whatever
 * the line holds. */
static const PlanNone plan_mode_none = {{"plan", "--mode=none", NULL},
                                        {"-smp", "4,sockets=3,cores=1", NULL},
                                        "mode none: "};
/* A probe (libvirt's, -machine none), which a launch runs as it is in any
 * mode: nothing planned either (outside check, stop 55: plan showed a VM
 * of 128 MiB and 1 vCPU that a launch never claims). */
static const PlanNone plan_probe = {
    {"plan", "--mode=balanced", NULL},
    {"-S", "-machine", "none,accel=kvm:tcg", NULL},
    "not a VM ("};

static void
test_plan_none(RbFixture *f, gconstpointer data)
{
  const PlanNone *c = data;
  g_autofree char *conf = NULL;
  g_auto(GStrv) envp = row_environ(f, NULL, NULL, &conf);
  g_autoptr(GPtrArray) argv = row_argv(f, PREFIX, c->opts, &envp);
  for (guint i = 0; c->args[i] != NULL; i++)
    g_ptr_array_add(argv, g_strdup(c->args[i]));
  g_ptr_array_add(argv, NULL);
  QpTestRun r;
  qp_test_run((char **)argv->pdata, envp, &r);
  g_test_message("stdout: %s stderr: %s", r.out, r.err);
  g_assert_cmpint(r.status, ==, 0);
  g_assert_cmpstr(r.err, ==, "");
  g_autoptr(JsonParser) parser = json_parser_new();
  if (!json_parser_load_from_data(parser, r.out, -1, NULL) ||
      json_parser_get_root(parser) == NULL ||
      !JSON_NODE_HOLDS_OBJECT(json_parser_get_root(parser))) {
    g_test_fail_printf("the plan is not JSON: %s", r.out);
    qp_test_run_clear(&r);
    return;
  }
  JsonObject *plan = json_node_get_object(json_parser_get_root(parser));
  g_assert_cmpstr(json_object_get_string_member(plan, "mode"), ==, "none");
  JsonArray *reasons = json_object_get_array_member(plan, "reasons");
  g_assert_cmpuint(json_array_get_length(reasons), ==, 1);
  g_assert_true(
      g_str_has_prefix(json_array_get_string_element(reasons, 0), c->reason));
  g_assert_cmpuint(
      json_array_get_length(json_object_get_array_member(plan, "warnings")), ==,
      0);
  g_assert_false(g_file_test(f->ran, G_FILE_TEST_EXISTS));
  qp_test_run_clear(&r);
}

int
main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  /* A row that fails says why and the table goes on. */
  g_test_set_nonfatal_assertions();
  for (gsize i = 0; i < G_N_ELEMENTS(rows); i++)
    g_test_add(rows[i].path, RbFixture, &rows[i], rb_setup, test_row,
               rb_teardown);
  for (gsize i = 0; i < G_N_ELEMENTS(none_rows); i++)
    g_test_add(none_rows[i].path, RbFixture, &none_rows[i], rb_setup,
               test_mode_none, rb_teardown);
  g_test_add("/mode-none/plan", RbFixture, &plan_mode_none, rb_setup,
             test_plan_none, rb_teardown);
  g_test_add("/mode-none/plan-probe", RbFixture, &plan_probe, rb_setup,
             test_plan_none, rb_teardown);
  return g_test_run();
}
