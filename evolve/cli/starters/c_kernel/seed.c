/* y = A x for an n x n fp32 matrix A (row-major). The seed: one dot product per row,
 * -O2, which GCC does not vectorise (the sum's order is fixed unless you allow -ffast-math
 * or split the sum yourself). */

// EVOLVE-BLOCK-START
// cflags: -O2    @knob choice -O2 | -O3 | -O3 -funroll-loops | -O3 -march=native | -Ofast -march=native
#define ACCUMULATORS 1  // @knob choice 1 | 2 | 4 | 8

void matvec(int n, const float *restrict A, const float *restrict x, float *restrict y) {
  for (int i = 0; i < n; i++) {
    const float *row = A + (long)i * n;
    float sum[ACCUMULATORS] = {0};
    int j = 0;
    for (; j + ACCUMULATORS <= n; j += ACCUMULATORS)
      for (int k = 0; k < ACCUMULATORS; k++) sum[k] += row[j + k] * x[j + k];
    for (; j < n; j++) sum[0] += row[j] * x[j];
    float total = 0;
    for (int k = 0; k < ACCUMULATORS; k++) total += sum[k];
    y[i] = total;
  }
}
// EVOLVE-BLOCK-END
