// Trusted adapter for cuda_softmax: how the runner calls the candidate and the reference.
// The candidate must define `softmax` with exactly this signature, as extern "C".
#define EVOLVE_ELEM float
extern "C" void softmax(const float *x, float *y, int rows, int cols);
extern "C" void evolve_reference(const float *x, float *y, int rows, int cols);

// dims: rows, cols (task.yaml `dims`); inputs: x; outputs: y.
static inline void evolve_run(int reference, float **in, float **out, const int64_t *dims) {
  (reference ? evolve_reference : softmax)(in[0], out[0], (int)dims[0], (int)dims[1]);
}
