/* Wall-time helpers of the bench programs that time a step in a loop
 * (snapshot-bench, zoneinfo-bench). */
#pragma once

/* CLOCK_MONOTONIC now, in microseconds. */
double qp_bench_now_us(void);

/* The median of the N values of V (sorted in place). */
double qp_bench_median(double *v, int n);
