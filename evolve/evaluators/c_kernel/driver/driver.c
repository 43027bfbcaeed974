/* `main` of every c_kernel binary, linked with the task's harness.c and the candidate.
 *
 *   ./kernel check in=B,B... out=B,... SIZES...   read inputs.bin, call once, write output.bin
 *   ./kernel serve in=B,B... out=B,... SIZES...   run calls for the trusted timer (timer.py)
 *
 * `in=` and `out=` give the byte count of each array in the inputs and the output buffer
 * (empty for none); the arrays lie in the buffers as evolve_kernel.h states, which is how
 * evolve_input and evolve_output find them. The buffers' sizes are the totals.
 *
 * This runs in the candidate's process, so nothing here is trusted and nothing here times
 * anything. In serve mode the timer, a separate process, owns the clock: it writes each
 * call's fresh inputs into shared memory and poisons the output while this process is
 * stopped, starts the clock, lets it run one call, stops the clock when it answers, stops
 * it again, and copies the output out for the evaluator to check.
 *
 * serve protocol: fd 3 is a shared memory file with the inputs at offset 0 and the output
 * at OUTPUT_OFFSET(in); one byte read from fd 4 per call ('c' call, 'q' quit), one byte
 * written to fd 5 ('r' once ready, 'd' after each call). Exit code 2: the driver failed.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "evolve_kernel.h"

#define PAGE 4096UL
#define ALIGN 64UL
#define OUTPUT_OFFSET(in) (((in) + PAGE - 1) / PAGE * PAGE)
#define SHARED_FD 3
#define GO_FD 4
#define DONE_FD 5

static void fail(const char *message) {
  fprintf(stderr, "driver: %s\n", message);
  exit(2);
}

/* Where each array of one buffer starts, by the rule in evolve_kernel.h, and the total. */
typedef struct {
  int count;
  size_t *offset;
  size_t total;
} Layout;

static Layout in_layout, out_layout;

static const char *argument(int argc, char **argv, const char *key) {
  size_t len = strlen(key);
  for (int i = 1; i < argc; i++)
    if (strncmp(argv[i], key, len) == 0 && argv[i][len] == '=') return argv[i] + len + 1;
  fprintf(stderr, "driver: missing argument %s=\n", key);
  exit(2);
}

long evolve_size(int argc, char **argv, const char *key) { return atol(argument(argc, argv, key)); }

static Layout parse_layout(const char *text) {
  Layout layout = {0, NULL, 0};
  size_t capacity = 1;
  for (const char *c = text; *c; c++) capacity += *c == ',';
  layout.offset = calloc(capacity, sizeof(size_t));
  if (!layout.offset) fail("out of memory");
  const char *at = text;
  while (*at) {
    char *end;
    unsigned long long bytes = strtoull(at, &end, 10);
    if (end == at || (*end != ',' && *end != '\0')) fail("in= and out= must be byte counts");
    size_t start = (layout.total + ALIGN - 1) / ALIGN * ALIGN;
    layout.offset[layout.count++] = start;
    layout.total = start + (size_t)bytes;
    at = *end ? end + 1 : end;
  }
  return layout;
}

static void no_array(const char *what, int index, int count) {
  fprintf(stderr, "driver: %s(%d): the task has %d such array(s)\n", what, index, count);
  exit(2);
}

const void *evolve_input(const void *inputs, int index) {
  if (index < 0 || index >= in_layout.count) no_array("evolve_input", index, in_layout.count);
  return (const unsigned char *)inputs + in_layout.offset[index];
}

void *evolve_output(void *output, int index) {
  if (index < 0 || index >= out_layout.count) no_array("evolve_output", index, out_layout.count);
  return (unsigned char *)output + out_layout.offset[index];
}

static void *page_buffer(size_t bytes) {
  void *p = aligned_alloc(PAGE, OUTPUT_OFFSET(bytes ? bytes : 1));
  if (!p) fail("out of memory");
  return p;
}

static void check(size_t in, size_t out) {
  unsigned char *inputs = page_buffer(in), *output = page_buffer(out);
  FILE *f = fopen("inputs.bin", "rb");
  if (!f || fread(inputs, 1, in, f) != in) fail("cannot read inputs.bin");
  fclose(f);
  memset(output, 0xff, out); /* all-ones bytes are NaN as float32 and float64 */
  evolve_call(inputs, output);
  f = fopen("output.bin", "wb");
  if (!f || fwrite(output, 1, out, f) != out || fclose(f) != 0) fail("cannot write output.bin");
}

static void answer(char byte) {
  if (write(DONE_FD, &byte, 1) != 1) fail("the timer went away");
}

static void serve(size_t in, size_t out) {
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); /* no sibling may open our memory or our fds */
  unsigned char *shared =
      mmap(NULL, OUTPUT_OFFSET(in) + out, PROT_READ | PROT_WRITE, MAP_SHARED, SHARED_FD, 0);
  if (shared == MAP_FAILED) fail("cannot map the shared inputs");
  answer('r');
  for (;;) {
    char order;
    ssize_t got = read(GO_FD, &order, 1);
    if (got == 0 || (got == 1 && order == 'q')) exit(0);
    if (got != 1 || order != 'c') fail("unexpected order from the timer");
    evolve_call(shared, shared + OUTPUT_OFFSET(in));
    answer('d');
  }
}

int main(int argc, char **argv) {
  if (argc < 4) fail("usage: kernel check|serve in=B,B... out=B,... SIZES...");
  in_layout = parse_layout(argument(argc, argv, "in"));
  out_layout = parse_layout(argument(argc, argv, "out"));
  if (out_layout.total == 0) fail("out= must give at least one byte");
  evolve_setup(argc, argv);
  if (strcmp(argv[1], "check") == 0)
    check(in_layout.total, out_layout.total);
  else if (strcmp(argv[1], "serve") == 0)
    serve(in_layout.total, out_layout.total);
  else
    fail("mode must be check or serve");
  return 0;
}
