// C = A * B for row-major fp32 matrices: A is M x K, B is K x N, C is M x N.
// The seed is the naive kernel: one thread per element of C, reading A and B from DRAM.
#include <cuda_runtime.h>

// EVOLVE-BLOCK-START
#define BLOCK_X 16  // @knob choice 8 | 16 | 32 | 64
#define BLOCK_Y 16  // @knob choice 1 | 2 | 4 | 8 | 16 | 32

static __global__ void matmul_naive(const float *A, const float *B, float *C, int M, int N,
                                    int K) {
  int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= M || col >= N) return;
  float sum = 0.0f;
  for (int k = 0; k < K; k++) sum += A[(size_t)row * K + k] * B[(size_t)k * N + col];
  C[(size_t)row * N + col] = sum;
}

extern "C" void matmul(const float *A, const float *B, float *C, int M, int N, int K) {
  dim3 block(BLOCK_X, BLOCK_Y), grid((N + BLOCK_X - 1) / BLOCK_X, (M + BLOCK_Y - 1) / BLOCK_Y);
  matmul_naive<<<grid, block>>>(A, B, C, M, N, K);
}
// EVOLVE-BLOCK-END
