/* matmul_c's harness: the evaluator's buffers to `matmul`'s signature.
 *
 * Inputs are A then B (n*n fp32 each, row-major), the output is C. The evaluator's driver
 * calls evolve_call once per kernel call, with fresh inputs every time.
 */
#include "evolve_kernel.h"

void matmul(int n, const float *restrict A, const float *restrict B, float *restrict C);

static int n;

void evolve_setup(int argc, char **argv) { n = (int)evolve_size(argc, argv, "n"); }

void evolve_call(const void *inputs, void *output) {
  const float *A = inputs;
  matmul(n, A, A + (size_t)n * n, output);
}
