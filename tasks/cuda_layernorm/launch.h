// Trusted adapter for cuda_layernorm: how the runner calls the candidate and the reference.
// The candidate must define `layernorm` with exactly this signature, as extern "C".
#define EVOLVE_ELEM float
extern "C" void layernorm(const float *x, const float *gamma, const float *beta, float *y,
                          int rows, int cols);
extern "C" void evolve_reference(const float *x, const float *gamma, const float *beta,
                                 float *y, int rows, int cols);

// dims: rows, cols (task.yaml `dims`); inputs: x, gamma, beta; outputs: y.
static inline void evolve_run(int reference, float **in, float **out, const int64_t *dims) {
  (reference ? evolve_reference : layernorm)(in[0], in[1], in[2], out[0], (int)dims[0],
                                             (int)dims[1]);
}
