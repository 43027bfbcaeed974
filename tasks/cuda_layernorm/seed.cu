// LayerNorm over the last dimension of a rows x cols fp32 matrix, eps = 1e-5:
// y = (x - mean) / sqrt(var + eps) * gamma + beta, with the biased variance.
// The seed is one thread per row, two passes for the statistics and one to write.
#include <cuda_runtime.h>

// EVOLVE-BLOCK-START
#define BLOCK 64  // @knob choice 32 | 64 | 128 | 256 | 512

static __global__ void layernorm_naive(const float *x, const float *gamma, const float *beta,
                                       float *y, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float *row = x + (size_t)r * cols;
  float *out = y + (size_t)r * cols;
  float mean = 0.0f;
  for (int c = 0; c < cols; c++) mean += row[c];
  mean /= cols;
  float var = 0.0f;
  for (int c = 0; c < cols; c++) var += (row[c] - mean) * (row[c] - mean);
  var /= cols;
  float inv = 1.0f / sqrtf(var + 1e-5f);
  for (int c = 0; c < cols; c++) out[c] = (row[c] - mean) * inv * gamma[c] + beta[c];
}

extern "C" void layernorm(const float *x, const float *gamma, const float *beta, float *y,
                          int rows, int cols) {
  layernorm_naive<<<(rows + BLOCK - 1) / BLOCK, BLOCK>>>(x, gamma, beta, y, rows, cols);
}
// EVOLVE-BLOCK-END
