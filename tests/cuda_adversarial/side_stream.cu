// static: side-stream
// Launches on a non-blocking stream and returns at once: the events on the default stream
// time nothing, and the real work finishes after the stop event.
#include <cuda_runtime.h>
// EVOLVE-BLOCK-START
static __global__ void work(const float *x, float *y, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float m = -INFINITY, s = 0.0f;
  for (int c = 0; c < cols; c++) m = fmaxf(m, x[r * cols + c]);
  for (int c = 0; c < cols; c++) s += expf(x[r * cols + c] - m);
  for (int c = 0; c < cols; c++) y[r * cols + c] = expf(x[r * cols + c] - m) / s;
}
extern "C" void softmax(const float *x, float *y, int rows, int cols) {
  static cudaStream_t side;
  if (!side) cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
  work<<<(rows + 127) / 128, 128, 0, side>>>(x, y, rows, cols);
}
// EVOLVE-BLOCK-END
