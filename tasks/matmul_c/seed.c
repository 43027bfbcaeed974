/* C = A * B for n x n row-major fp32 matrices (the textbook i-j-k loop, tiled by knobs). */
#define IJK 0
#define IKJ 1
#define JIK 2
#define JKI 3
#define KIJ 4
#define KJI 5

// EVOLVE-BLOCK-START
// cflags: -O2    @knob choice -O2 | -O3 | -O3 -march=native | -O3 -march=native -funroll-loops | -Ofast -march=native | -O1
#define TILE_I 512      // @knob pow2 1..512
#define TILE_J 512      // @knob pow2 1..512
#define TILE_K 512      // @knob pow2 1..512
#define LOOP_ORDER IJK  // @knob choice IJK | IKJ | JIK | JKI | KIJ | KJI
#define MIN(a, b) ((a) < (b) ? (a) : (b))

void matmul(int n, const float *restrict A, const float *restrict B, float *restrict C) {
  for (int i = 0; i < n * n; i++) C[i] = 0.0f;
  for (int ii = 0; ii < n; ii += TILE_I)
    for (int kk = 0; kk < n; kk += TILE_K)
      for (int jj = 0; jj < n; jj += TILE_J) {
        const int i_end = MIN(ii + TILE_I, n), j_end = MIN(jj + TILE_J, n), k_end = MIN(kk + TILE_K, n);
#if LOOP_ORDER == IJK
        for (int i = ii; i < i_end; i++)
          for (int j = jj; j < j_end; j++)
            for (int k = kk; k < k_end; k++)
#elif LOOP_ORDER == IKJ
        for (int i = ii; i < i_end; i++)
          for (int k = kk; k < k_end; k++)
            for (int j = jj; j < j_end; j++)
#elif LOOP_ORDER == JIK
        for (int j = jj; j < j_end; j++)
          for (int i = ii; i < i_end; i++)
            for (int k = kk; k < k_end; k++)
#elif LOOP_ORDER == JKI
        for (int j = jj; j < j_end; j++)
          for (int k = kk; k < k_end; k++)
            for (int i = ii; i < i_end; i++)
#elif LOOP_ORDER == KIJ
        for (int k = kk; k < k_end; k++)
          for (int i = ii; i < i_end; i++)
            for (int j = jj; j < j_end; j++)
#else
        for (int k = kk; k < k_end; k++)
          for (int j = jj; j < j_end; j++)
            for (int i = ii; i < i_end; i++)
#endif
              C[i * n + j] += A[i * n + k] * B[k * n + j];
      }
}
// EVOLVE-BLOCK-END
