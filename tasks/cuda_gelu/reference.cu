// Trusted reference kernel for cuda_gelu (exact, erf-based), timed beside the candidate:
// a grid-stride loop, one float per thread per step, as a framework's eager op would do.
namespace {

__global__ void gelu_exact(const float *x, float *y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float v = x[i];
    y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  }
}

}  // namespace

extern "C" void evolve_reference(const float *x, float *y, int n) {
  int blocks = (n + 255) / 256;
  gelu_exact<<<blocks < 65535 ? blocks : 65535, 256>>>(x, y, n);
}
