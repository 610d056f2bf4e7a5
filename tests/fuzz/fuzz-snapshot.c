/* libFuzzer target for the host snapshot's reader (qp_host_snapshot_parse):
 * the input is the snapshot's text before its end line, which the target
 * adds with the right hash, so that what is fuzzed is the reader's checks,
 * not the hash. A host it reads is written again, and that text reads back
 * to a host that is written the same. */
#include <stdlib.h>
#include <string.h>

#include "topology/base/dir-file.h"
#include "topology/host/snapshot-text.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

#define KEY "boot fuzz\n"

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
  if (size > 256 * 1024)
    return 0;
  GString *text = g_string_new(QP_HOST_SNAPSHOT_HEADER KEY);
  g_string_append_len(text, (const char *)data, (gssize)size);
  guint64 hash = qp_dir_file_hash(text->str, text->len);
  g_string_append_printf(text, "end %016" G_GINT64_MODIFIER "x\n", hash);
  g_autoptr(QpHost) host = qp_host_snapshot_parse(text->str, text->len, KEY);
  g_string_free(text, TRUE);
  if (host == NULL)
    return 0;
  g_autofree char *out = qp_host_snapshot_format(host, KEY);
  if (out == NULL)
    abort();
  g_autoptr(QpHost) again = qp_host_snapshot_parse(out, strlen(out), KEY);
  if (again == NULL)
    abort();
  g_autofree char *out2 = qp_host_snapshot_format(again, KEY);
  if (out2 == NULL || strcmp(out, out2) != 0)
    abort();
  return 0;
}
