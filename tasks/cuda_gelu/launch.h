// Trusted adapter for cuda_gelu: how the runner calls the candidate and the reference.
// The candidate must define `gelu` with exactly this signature, as extern "C".
#define EVOLVE_ELEM float
extern "C" void gelu(const float *x, float *y, int n);
extern "C" void evolve_reference(const float *x, float *y, int n);

// dims: n (task.yaml `dims`); inputs: x; outputs: y.
static inline void evolve_run(int reference, float **in, float **out, const int64_t *dims) {
  (reference ? evolve_reference : gelu)(in[0], out[0], (int)dims[0]);
}
