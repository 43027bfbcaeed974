// Row-wise softmax of a rows x cols row-major fp32 matrix: y[r][c] = exp(x[r][c] - max_r) / sum_r.
// The seed is deliberately naive: one thread per row, three passes over the row.
#include <cuda_runtime.h>

// EVOLVE-BLOCK-START
#define BLOCK 128  // @knob choice 32 | 64 | 128 | 256 | 512 | 1024

static __global__ void softmax_naive(const float *x, float *y, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float *row = x + (size_t)r * cols;
  float *out = y + (size_t)r * cols;
  float m = -INFINITY;
  for (int c = 0; c < cols; c++) m = fmaxf(m, row[c]);
  float sum = 0.0f;
  for (int c = 0; c < cols; c++) sum += expf(row[c] - m);
  for (int c = 0; c < cols; c++) out[c] = expf(row[c] - m) / sum;
}

extern "C" void softmax(const float *x, float *y, int rows, int cols) {
  softmax_naive<<<(rows + BLOCK - 1) / BLOCK, BLOCK>>>(x, y, rows, cols);
}
// EVOLVE-BLOCK-END
