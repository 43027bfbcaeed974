// check: modified input 0
// Computes the right answer, but uses its input as scratch space (exponentials in place).
#include <cuda_runtime.h>
// EVOLVE-BLOCK-START
static __global__ void work(const float *x, float *y, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float *row = const_cast<float *>(x) + (size_t)r * cols;
  float m = -INFINITY, s = 0.0f;
  for (int c = 0; c < cols; c++) m = fmaxf(m, row[c]);
  for (int c = 0; c < cols; c++) s += (row[c] = expf(row[c] - m));
  for (int c = 0; c < cols; c++) y[(size_t)r * cols + c] = row[c] / s;
}
extern "C" void softmax(const float *x, float *y, int rows, int cols) {
  work<<<(rows + 127) / 128, 128>>>(x, y, rows, cols);
}
// EVOLVE-BLOCK-END
