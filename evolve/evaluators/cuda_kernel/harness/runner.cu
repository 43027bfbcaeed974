// Trusted runner, compiled by nvcc together with the candidate's .cu and the task's adapter.
//
// It only moves tensors: it never holds the reference answer. The evaluator writes the
// inputs, reads the outputs back, and judges them in its own process.
//
//   runner check candidate|reference
//       for each round k in manifest.txt: fresh device buffers, inputs from in_<k>.bin,
//       outputs poisoned with 0xFF bytes (NaN) plus a poisoned guard band, one call, then
//       out_<k>.bin (each output with its guard band) and back_<k>.bin (the inputs as the
//       kernel left them)
//   runner time WARMUP REPS SEED
//       every round in manifest.txt is one input set of the timed shape; candidate and
//       reference are timed alternately (random order, random set) with CUDA events and a
//       wall clock around each call; an L2 flush and output poisoning precede each call;
//       writes times.txt, device.txt, out_<k>.bin and back_<k>.bin (each set's last use)
//
// Exit codes: 2 harness misuse or I/O, 3 no usable GPU, 4 a CUDA error during the call.
// Plain C only, no std:: templates: a candidate object may not define what the runner uses.
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "launch.h"

#define MAX_TENSORS 8
#define MAX_DIMS 8
#define MAX_ROUNDS 32
#define GUARD_ELEMS 256
#define POISON 0xFF

typedef EVOLVE_ELEM elem_t;

struct Round {
  int64_t dims[MAX_DIMS];
  int64_t in_elems[MAX_TENSORS];
  int64_t out_elems[MAX_TENSORS];
};

struct Manifest {
  int rounds, ndims, nin, nout;
  struct Round round[MAX_ROUNDS];
};

static void fail(int code, const char *what, const char *detail) {
  fprintf(stderr, "runner: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  exit(code);
}

static void cuda_ok(cudaError_t status, const char *what) {
  if (status != cudaSuccess) fail(4, what, cudaGetErrorString(status));
}

static void read_manifest(struct Manifest *m) {
  FILE *f = fopen("manifest.txt", "r");
  if (!f) fail(2, "cannot open manifest.txt", NULL);
  if (fscanf(f, "%d %d %d %d", &m->rounds, &m->ndims, &m->nin, &m->nout) != 4)
    fail(2, "bad manifest header", NULL);
  if (m->rounds < 1 || m->rounds > MAX_ROUNDS || m->ndims > MAX_DIMS || m->nin > MAX_TENSORS ||
      m->nout > MAX_TENSORS || m->ndims < 1 || m->nin < 1 || m->nout < 1)
    fail(2, "manifest out of range", NULL);
  for (int k = 0; k < m->rounds; k++) {
    struct Round *r = &m->round[k];
    int ok = 1;
    for (int i = 0; i < m->ndims; i++) ok &= fscanf(f, "%lld", (long long *)&r->dims[i]) == 1;
    for (int i = 0; i < m->nin; i++) ok &= fscanf(f, "%lld", (long long *)&r->in_elems[i]) == 1;
    for (int i = 0; i < m->nout; i++) ok &= fscanf(f, "%lld", (long long *)&r->out_elems[i]) == 1;
    if (!ok) fail(2, "bad manifest round", NULL);
  }
  fclose(f);
}

static char *name_of(const char *prefix, int k) {
  static char name[64];
  snprintf(name, sizeof name, "%s_%d.bin", prefix, k);
  return name;
}

static void *host_alloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) fail(2, "out of host memory", NULL);
  return p;
}

static void load_inputs(const struct Manifest *m, int k, elem_t **device) {
  FILE *f = fopen(name_of("in", k), "rb");
  if (!f) fail(2, "cannot open an input file", name_of("in", k));
  for (int i = 0; i < m->nin; i++) {
    size_t count = (size_t)m->round[k].in_elems[i];
    elem_t *host = (elem_t *)host_alloc(count * sizeof(elem_t));
    if (fread(host, sizeof(elem_t), count, f) != count) fail(2, "input file too short", NULL);
    cuda_ok(cudaMalloc((void **)&device[i], count * sizeof(elem_t)), "cudaMalloc input");
    cuda_ok(cudaMemcpy(device[i], host, count * sizeof(elem_t), cudaMemcpyHostToDevice), "upload");
    free(host);
  }
  fclose(f);
}

static void alloc_outputs(const struct Manifest *m, int k, elem_t **device) {
  for (int i = 0; i < m->nout; i++) {
    size_t count = (size_t)m->round[k].out_elems[i] + GUARD_ELEMS;
    cuda_ok(cudaMalloc((void **)&device[i], count * sizeof(elem_t)), "cudaMalloc output");
  }
}

static void poison_outputs(const struct Manifest *m, int k, elem_t **device) {
  for (int i = 0; i < m->nout; i++) {
    size_t count = (size_t)m->round[k].out_elems[i] + GUARD_ELEMS;
    cuda_ok(cudaMemset(device[i], POISON, count * sizeof(elem_t)), "poisoning an output");
  }
}

static void save(const char *prefix, int k, elem_t **device, const int64_t *elems, int n,
                 int guard) {
  FILE *f = fopen(name_of(prefix, k), "wb");
  if (!f) fail(2, "cannot write", name_of(prefix, k));
  for (int i = 0; i < n; i++) {
    size_t count = (size_t)elems[i] + (guard ? GUARD_ELEMS : 0);
    elem_t *host = (elem_t *)host_alloc(count * sizeof(elem_t));
    cuda_ok(cudaMemcpy(host, device[i], count * sizeof(elem_t), cudaMemcpyDeviceToHost),
            "download");
    if (fwrite(host, sizeof(elem_t), count, f) != count) fail(2, "short write", NULL);
    free(host);
  }
  if (fclose(f) != 0) fail(2, "cannot write", name_of(prefix, k));
}

static void release(elem_t **device, int n) {
  for (int i = 0; i < n; i++) cudaFree(device[i]);
}

static void call(int reference, const struct Round *r, elem_t **in, elem_t **out) {
  evolve_run(reference, in, out, r->dims);
  cuda_ok(cudaGetLastError(), "launching the kernel");
  cuda_ok(cudaDeviceSynchronize(), "running the kernel");
}

static void require_gpu(void) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) fail(3, "no usable CUDA device", cudaGetErrorString(status));
  if (count < 1) fail(3, "no usable CUDA device", "the driver reports 0 devices");
}

static int check(const struct Manifest *m, int reference) {
  for (int k = 0; k < m->rounds; k++) {
    elem_t *in[MAX_TENSORS], *out[MAX_TENSORS];
    load_inputs(m, k, in);
    alloc_outputs(m, k, out);
    poison_outputs(m, k, out);
    cuda_ok(cudaDeviceSynchronize(), "preparing buffers");
    call(reference, &m->round[k], in, out);
    save("out", k, out, m->round[k].out_elems, m->nout, 1);
    save("back", k, in, m->round[k].in_elems, m->nin, 0);
    release(in, m->nin);
    release(out, m->nout);
  }
  return 0;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

static uint64_t next_random(uint64_t *state) {  // xorshift64*: the order of sets and callers
  *state ^= *state >> 12;
  *state ^= *state << 25;
  *state ^= *state >> 27;
  return *state * 2685821657736338717ULL;
}

static int attribute(enum cudaDeviceAttr which) {
  int value = 0;
  cuda_ok(cudaDeviceGetAttribute(&value, which, 0), "reading a device attribute");
  return value;
}

static void write_device(void) {
  struct cudaDeviceProp prop;
  cuda_ok(cudaGetDeviceProperties(&prop, 0), "reading device properties");
  FILE *f = fopen("device.txt", "w");
  if (!f) fail(2, "cannot write device.txt", NULL);
  fprintf(f, "name=%s\n", prop.name);
  fprintf(f, "cc=%d.%d\n", prop.major, prop.minor);
  fprintf(f, "sms=%d\n", attribute(cudaDevAttrMultiProcessorCount));
  fprintf(f, "clock_khz=%d\n", attribute(cudaDevAttrClockRate));
  fprintf(f, "mem_clock_khz=%d\n", attribute(cudaDevAttrMemoryClockRate));
  fprintf(f, "bus_bits=%d\n", attribute(cudaDevAttrGlobalMemoryBusWidth));
  fprintf(f, "l2_bytes=%d\n", attribute(cudaDevAttrL2CacheSize));
  if (fclose(f) != 0) fail(2, "cannot write device.txt", NULL);
}

struct Timing {
  double event_ms, wall_ms;
};

// One timed call: flush L2 and poison the outputs outside the timed window, then time the
// call with events on the legacy default stream and with the host clock around a full
// device synchronisation, which also waits for work the call left on any other stream.
static struct Timing timed_call(int reference, const struct Round *r, elem_t **in,
                                elem_t **out, const struct Manifest *m, int set, char *flush,
                                size_t flush_bytes, cudaEvent_t start, cudaEvent_t stop) {
  static int stamp;  // a new byte each time, so no flush is a no-op the driver could skip
  poison_outputs(m, set, out);
  cuda_ok(cudaMemset(flush, ++stamp & 0x7F, flush_bytes), "flushing L2");
  cuda_ok(cudaDeviceSynchronize(), "before a timed call");
  struct Timing t;
  double begin = now_ms();
  cuda_ok(cudaEventRecord(start, 0), "recording the start event");
  evolve_run(reference, in, out, r->dims);
  cuda_ok(cudaEventRecord(stop, 0), "recording the stop event");
  cuda_ok(cudaDeviceSynchronize(), "running the kernel");
  t.wall_ms = now_ms() - begin;
  cuda_ok(cudaGetLastError(), "launching the kernel");
  float ms = 0.0f;
  cuda_ok(cudaEventElapsedTime(&ms, start, stop), "reading the events");
  t.event_ms = ms;
  return t;
}

static int time_both(const struct Manifest *m, int warmup, int reps, uint64_t seed) {
  int sets = m->rounds;
  elem_t *in[MAX_ROUNDS][MAX_TENSORS], *out[MAX_ROUNDS][MAX_TENSORS];
  elem_t *ref_out[MAX_TENSORS];
  for (int k = 0; k < sets; k++) {
    load_inputs(m, k, in[k]);
    alloc_outputs(m, k, out[k]);
  }
  alloc_outputs(m, 0, ref_out);
  size_t flush_bytes = 2 * (size_t)attribute(cudaDevAttrL2CacheSize) + (8u << 20);
  char *flush = NULL;
  cuda_ok(cudaMalloc((void **)&flush, flush_bytes), "cudaMalloc L2 flush buffer");
  cudaEvent_t start, stop;
  cuda_ok(cudaEventCreate(&start), "cudaEventCreate");
  cuda_ok(cudaEventCreate(&stop), "cudaEventCreate");
  for (int w = 0; w < warmup; w++) {
    call(0, &m->round[w % sets], in[w % sets], out[w % sets]);
    call(1, &m->round[w % sets], in[w % sets], ref_out);
  }
  FILE *f = fopen("times.txt", "w");
  if (!f) fail(2, "cannot write times.txt", NULL);
  uint64_t state = seed | 1;
  int order[MAX_ROUNDS];
  for (int r = 0; r < reps; r++) {
    if (r % sets == 0) {  // a fresh random permutation of the sets every cycle
      for (int k = 0; k < sets; k++) order[k] = k;
      for (int k = sets - 1; k > 0; k--) {
        int j = (int)(next_random(&state) % (uint64_t)(k + 1));
        int swap = order[k];
        order[k] = order[j];
        order[j] = swap;
      }
    }
    int set = order[r % sets];
    int reference_turn = (int)(next_random(&state) & 1);
    struct Timing cand, ref;
    for (int turn = 0; turn < 2; turn++) {
      if (turn == reference_turn) {
        ref = timed_call(1, &m->round[set], in[set], ref_out, m, set, flush, flush_bytes, start,
                         stop);
        poison_outputs(m, set, ref_out);  // no reference answer is left for the candidate
      } else {
        cand = timed_call(0, &m->round[set], in[set], out[set], m, set, flush, flush_bytes,
                          start, stop);
      }
    }
    fprintf(f, "%d %.6f %.6f %.6f %.6f\n", set, cand.event_ms, cand.wall_ms, ref.event_ms,
            ref.wall_ms);
  }
  if (fclose(f) != 0) fail(2, "cannot write times.txt", NULL);
  for (int k = 0; k < sets; k++) {
    save("out", k, out[k], m->round[k].out_elems, m->nout, 1);
    save("back", k, in[k], m->round[k].in_elems, m->nin, 0);
  }
  write_device();
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) fail(2, "usage: runner check candidate|reference | runner time W REPS SEED", 0);
  struct Manifest *m = (struct Manifest *)host_alloc(sizeof(struct Manifest));
  if (strcmp(argv[1], "check") == 0 && argc == 3) {
    require_gpu();
    read_manifest(m);
    return check(m, strcmp(argv[2], "reference") == 0);
  }
  if (strcmp(argv[1], "time") == 0 && argc == 5) {
    int warmup = atoi(argv[2]), reps = atoi(argv[3]);
    if (warmup < 0 || reps < 1) fail(2, "WARMUP >= 0 and REPS >= 1, please", NULL);
    require_gpu();
    read_manifest(m);
    return time_both(m, warmup, reps, strtoull(argv[4], NULL, 10));
  }
  fail(2, "usage: runner check candidate|reference | runner time W REPS SEED", NULL);
  return 2;
}
