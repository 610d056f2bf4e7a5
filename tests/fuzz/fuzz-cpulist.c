/* libFuzzer target for the CPU and node list parser (qp_list_parse): every
 * accepted list prints canonically (qp_list_format), and the canonical form
 * parses back to the same set; a rejected one gets a one-line error. */
#include <stdlib.h>
#include <string.h>

#include "topology/base/cpulist.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int
LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
  if (size > 1024)
    return 0;
  /* A string as argv or the environment hands it over: up to a NUL. */
  g_autofree char *text = g_strndup((const char *)data, size);
  g_autoptr(GError) error = NULL;
  g_auto(hwloc_bitmap_t) set = NULL;

  if (!qp_list_parse(text, "--affinity", QP_LIST_MAX_INDEX, &set, &error)) {
    /* The value is quoted as given: a newline in it is a newline in the
     * message, escaped when qemu-pin prints it (finding 1 in
     * docs/robustness.md). */
    if (error == NULL ||
        (strpbrk(text, "\r\n") == NULL && strchr(error->message, '\n')))
      abort();
    return 0;
  }
  if (set == NULL || hwloc_bitmap_weight(set) < 0 ||
      hwloc_bitmap_last(set) > QP_LIST_MAX_INDEX)
    abort();
  g_autofree char *canon = qp_list_format(set);
  g_auto(hwloc_bitmap_t) again = NULL;
  if (!qp_list_parse(canon, "canonical", QP_LIST_MAX_INDEX, &again, NULL))
    abort();
  if (!hwloc_bitmap_isequal(set, again))
    abort();
  return 0;
}
