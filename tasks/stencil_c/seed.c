/* Jacobi sweeps of the 5-point stencil over an n x n fp32 grid with a fixed boundary:
 * new[i][j] = 0.5 old[i][j] + 0.125 (old[i-1][j] + old[i+1][j] + old[i][j-1] + old[i][j+1]).
 * `steps` sweeps, ping-ponging between `out` and the scratch grid `tmp` so that the last
 * sweep lands in `out`. The seed: row order, untiled, -O2, which GCC 12 does not vectorise. */
#define IJ 0
#define JI 1

// EVOLVE-BLOCK-START
// cflags: -O2    @knob choice -O1 | -O2 | -O3 | -O3 -funroll-loops | -O3 -mavx2 -mfma | -Ofast -mavx2 -mfma | -O3 -march=native | -Ofast -march=native
#define TILE_I 1024    // @knob pow2 1..1024
#define TILE_J 1024    // @knob pow2 1..1024
#define LOOP_ORDER IJ  // @knob choice IJ | JI
#define MIN(a, b) ((a) < (b) ? (a) : (b))

static void sweep(int n, const float *restrict src, float *restrict dst) {
  for (int j = 0; j < n; j++) {
    dst[j] = src[j];
    dst[(n - 1) * n + j] = src[(n - 1) * n + j];
  }
  for (int i = 1; i < n - 1; i++) {
    dst[i * n] = src[i * n];
    dst[i * n + n - 1] = src[i * n + n - 1];
  }
  for (int ii = 1; ii < n - 1; ii += TILE_I)
    for (int jj = 1; jj < n - 1; jj += TILE_J) {
      const int i_end = MIN(ii + TILE_I, n - 1), j_end = MIN(jj + TILE_J, n - 1);
#if LOOP_ORDER == IJ
      for (int i = ii; i < i_end; i++)
        for (int j = jj; j < j_end; j++)
#else
      for (int j = jj; j < j_end; j++)
        for (int i = ii; i < i_end; i++)
#endif
          dst[i * n + j] = 0.5f * src[i * n + j] + 0.125f * (src[(i - 1) * n + j] +
                                                          src[(i + 1) * n + j] +
                                                          src[i * n + j - 1] + src[i * n + j + 1]);
    }
}

void stencil(int n, int steps, const float *restrict in, float *restrict out, float *restrict tmp) {
  const float *src = in;
  for (int s = 0; s < steps; s++) {
    float *dst = (steps - 1 - s) % 2 == 0 ? out : tmp;
    sweep(n, src, dst);
    src = dst;
  }
}
// EVOLVE-BLOCK-END
