// GELU, exact form: y = 0.5 * x * (1 + erf(x / sqrt(2))), elementwise over n fp32 values.
// The seed is one thread per element.
#include <cuda_runtime.h>

// EVOLVE-BLOCK-START
#define BLOCK 128  // @knob choice 64 | 128 | 256 | 512 | 1024

static __global__ void gelu_naive(const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] / sqrtf(2.0f)));
}

extern "C" void gelu(const float *x, float *y, int n) {
  gelu_naive<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(x, y, n);
}
// EVOLVE-BLOCK-END
