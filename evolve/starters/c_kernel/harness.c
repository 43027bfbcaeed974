/* The harness: the evaluator's buffers to the kernel's signature.
 *
 * Inputs arrive packed in the order reference.py's make_inputs lists them: the n x n matrix
 * A (row-major fp32), then the vector x. The output is y = A x. The evaluator's driver calls
 * evolve_call once per kernel call, with fresh inputs every time.
 */
#include "evolve_kernel.h"

void matvec(int n, const float *restrict A, const float *restrict x, float *restrict y);

static int n;

void evolve_setup(int argc, char **argv) { n = (int)evolve_size(argc, argv, "n"); }

void evolve_call(const void *inputs, void *output) {
  const float *A = inputs;
  matvec(n, A, A + (size_t)n * n, output);
}
