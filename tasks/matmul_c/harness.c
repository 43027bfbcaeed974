/* Trusted driver for the matmul_c task, linked with the candidate's object file.
 *
 *   ./kernel check n=N        read inputs.bin (A then B, raw fp32, n*n each), call matmul
 *                             once, write C to output.bin
 *   ./kernel time REPS n=N    one warm-up call, then REPS timed calls; write each call's
 *                             seconds (CLOCK_MONOTONIC) to times.txt, one per line, and the
 *                             last call's C to output.bin so the evaluator can check it too
 *
 * C is filled with NaN before every call, so a kernel that skips work cannot pass on what an
 * earlier call left behind. Exit code 2 means the harness itself could not run.
 */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void matmul(int n, const float *restrict A, const float *restrict B, float *restrict C);

static void fail(const char *message) {
  fprintf(stderr, "harness: %s\n", message);
  exit(2);
}

static float *alloc_floats(size_t count) {
  size_t bytes = (count * sizeof(float) + 63) / 64 * 64;
  float *p = aligned_alloc(64, bytes);
  if (!p) fail("out of memory");
  return p;
}

static int size_arg(int argc, char **argv, const char *key) {
  size_t len = strlen(key);
  for (int i = 1; i < argc; i++)
    if (strncmp(argv[i], key, len) == 0 && argv[i][len] == '=') return atoi(argv[i] + len + 1);
  fail("missing size argument");
  return 0;
}

static void read_floats(FILE *f, float *dst, size_t count) {
  if (fread(dst, sizeof(float), count, f) != count) fail("inputs.bin is too short");
}

static void write_file(const char *path, const void *data, size_t bytes) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, bytes, f) != bytes || fclose(f) != 0) fail("cannot write output");
}

static void poison(float *C, size_t count) {
  for (size_t i = 0; i < count; i++) C[i] = NAN;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc < 3) fail("usage: kernel check n=N | kernel time REPS n=N");
  int timing = strcmp(argv[1], "time") == 0;
  if (!timing && strcmp(argv[1], "check") != 0) fail("mode must be check or time");
  int reps = timing ? atoi(argv[2]) : 0;
  int n = size_arg(argc, argv, "n");
  if (n <= 0 || (timing && reps <= 0)) fail("sizes and REPS must be positive");

  size_t count = (size_t)n * (size_t)n;
  float *A = alloc_floats(count), *B = alloc_floats(count), *C = alloc_floats(count);
  FILE *in = fopen("inputs.bin", "rb");
  if (!in) fail("cannot open inputs.bin");
  read_floats(in, A, count);
  read_floats(in, B, count);
  fclose(in);

  poison(C, count);
  matmul(n, A, B, C);
  if (timing) {
    double *seconds = malloc((size_t)reps * sizeof(double));
    if (!seconds) fail("out of memory");
    for (int r = 0; r < reps; r++) {
      poison(C, count);
      double start = now();
      matmul(n, A, B, C);
      seconds[r] = now() - start;
    }
    FILE *out = fopen("times.txt", "w");
    if (!out) fail("cannot write times.txt");
    for (int r = 0; r < reps; r++) fprintf(out, "%.9e\n", seconds[r]);
    if (fclose(out) != 0) fail("cannot write times.txt");
  }
  write_file("output.bin", C, count * sizeof(float));
  return 0;
}
