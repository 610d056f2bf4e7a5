/* Wall-time helpers of the bench programs (bench-time.h). */
#include "bench/bench-time.h"

#include <stdlib.h>
#include <time.h>

double
qp_bench_now_us(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int
compare_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double
qp_bench_median(double *v, int n)
{
  qsort(v, (size_t)n, sizeof *v, compare_double);
  return v[n / 2];
}
