// Trusted adapter for cuda_matmul: how the runner calls the candidate and the reference.
// The candidate must define `matmul` with exactly this signature, as extern "C".
#define EVOLVE_ELEM float
extern "C" void matmul(const float *A, const float *B, float *C, int M, int N, int K);
extern "C" void evolve_reference(const float *A, const float *B, float *C, int M, int N, int K);

// dims: M, N, K (task.yaml `dims`); inputs: A (M x K), B (K x N); outputs: C (M x N).
static inline void evolve_run(int reference, float **in, float **out, const int64_t *dims) {
  (reference ? evolve_reference : matmul)(in[0], in[1], out[0], (int)dims[0], (int)dims[1],
                                          (int)dims[2]);
}
