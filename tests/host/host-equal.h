/* Two host models field by field (topology/host/host.h), each difference
 * a failed assertion that names the field. */
#pragma once

#include "topology/host/host.h"

/* Asserts A and B are the same host. With LIVE, what a live host reads
 * anew at each load and changes meanwhile may differ: a node's free memory,
 * what the kernel can give, used and ARC memory, and free hugepages. */
void qp_assert_host_equal(const QpHost *a, const QpHost *b, gboolean live);
