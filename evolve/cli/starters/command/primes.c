/* Counts the primes below LIMIT and prints the count. The command evaluator builds it with
 * the task's `build` command, runs it, times the run from outside the sandbox, and
 * check.py (trusted, outside the sandbox) rejects a wrong count. */
#include <stdio.h>
#include <stdlib.h>

#define LIMIT 3000000

// EVOLVE-BLOCK-START
#define METHOD 0    // @knob choice 0 | 1
#define ODD_ONLY 0  // @knob choice 0 | 1

static int is_prime(long n) {
  if (n < 2) return 0;
  for (long d = 2; d * d <= n; d++)
    if (n % d == 0) return 0;
  return 1;
}

static long count_primes(long limit) {
  long count = 0;
#if METHOD == 1
  char *composite = calloc(limit, 1);
  if (!composite) return -1;
  for (long i = 2; i < limit; i++) {
    if (ODD_ONLY && i > 2 && i % 2 == 0) continue;
    if (composite[i]) continue;
    count++;
    for (long j = i * i; j < limit; j += i) composite[j] = 1;
  }
  free(composite);
#else
  for (long i = 2; i < limit; i++) {
    if (ODD_ONLY && i > 2 && i % 2 == 0) continue;
    count += is_prime(i);
  }
#endif
  return count;
}
// EVOLVE-BLOCK-END

int main(void) {
  printf("%ld\n", count_primes(LIMIT));
  return 0;
}
