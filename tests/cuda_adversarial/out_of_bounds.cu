// check: wrote past its end
// Right answer, plus a store one element past the end of the output (a wrong shape).
#include <cuda_runtime.h>
// EVOLVE-BLOCK-START
static __global__ void work(const float *x, float *y, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float *row = x + (size_t)r * cols;
  float m = -INFINITY, s = 0.0f;
  for (int c = 0; c < cols; c++) m = fmaxf(m, row[c]);
  for (int c = 0; c < cols; c++) s += expf(row[c] - m);
  for (int c = 0; c < cols; c++) y[(size_t)r * cols + c] = expf(row[c] - m) / s;
  if (r == rows - 1) y[(size_t)rows * cols] = 1.0f;
}
extern "C" void softmax(const float *x, float *y, int rows, int cols) {
  work<<<(rows + 127) / 128, 128>>>(x, y, rows, cols);
}
// EVOLVE-BLOCK-END
