/* A histogram of n bytes: counts[v] = how many bytes equal v, for v in 0..255. The seed
 * counts into SUB_HISTOGRAMS tables, byte i into table i % SUB_HISTOGRAMS, and adds them
 * up at the end; with one table, a run of equal bytes increments one counter back to back,
 * and each increment waits for the one before it. */
#include <stdint.h>
#include <string.h>

// EVOLVE-BLOCK-START
// cflags: -O2    @knob choice -O1 | -O2 | -O3 | -O3 -funroll-loops | -O3 -march=native | -Ofast -march=native
#define SUB_HISTOGRAMS 1  // @knob int 1..16

void histogram(int n, const uint8_t *restrict data, uint32_t *restrict counts) {
  uint32_t tables[SUB_HISTOGRAMS][256];
  memset(tables, 0, sizeof tables);
  int i = 0;
  for (; i + SUB_HISTOGRAMS <= n; i += SUB_HISTOGRAMS)
    for (int t = 0; t < SUB_HISTOGRAMS; t++) tables[t][data[i + t]]++;
  for (; i < n; i++) tables[0][data[i]]++;
  for (int v = 0; v < 256; v++) {
    uint32_t total = 0;
    for (int t = 0; t < SUB_HISTOGRAMS; t++) total += tables[t][v];
    counts[v] = total;
  }
}
// EVOLVE-BLOCK-END
