/* stencil_c's harness: the evaluator's buffers to `stencil`'s signature.
 *
 * Hand-written rather than generated from a `signature:`, because of the scratch grid: it
 * is the harness's, not the candidate's, so that a kernel needs no allocation of its own
 * (the second grid of a ping-pong is part of the problem, not an optimisation). The input
 * is the n*n fp32 grid (row-major), the output the grid after `steps` sweeps.
 */
#include <stdio.h>
#include <stdlib.h>

#include "evolve_kernel.h"

void stencil(int n, int steps, const float *restrict in, float *restrict out, float *restrict tmp);

static int n, steps;
static float *tmp;

void evolve_setup(int argc, char **argv) {
  n = (int)evolve_size(argc, argv, "n");
  steps = (int)evolve_size(argc, argv, "steps");
  if (n < 3 || steps < 1) {
    fprintf(stderr, "harness: need n >= 3 and steps >= 1\n");
    exit(2);
  }
  size_t bytes = ((size_t)n * n * sizeof(float) + 63) / 64 * 64;
  tmp = aligned_alloc(64, bytes);
  if (!tmp) {
    fprintf(stderr, "harness: out of memory\n");
    exit(2);
  }
}

void evolve_call(const void *inputs, void *output) {
  stencil(n, steps, evolve_input(inputs, 0), evolve_output(output, 0), tmp);
}
