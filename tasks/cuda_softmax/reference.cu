// Trusted reference kernel for cuda_softmax, timed in the same session as the candidate.
// One block per row: a block-wide max, then a block-wide sum of exponentials, in shared
// memory: the straightforward kernel a library would start from.
namespace {

constexpr int THREADS = 256;

__global__ void softmax_rows(const float *x, float *y, int cols) {
  __shared__ float scratch[THREADS];
  const float *row = x + (size_t)blockIdx.x * cols;
  float *out = y + (size_t)blockIdx.x * cols;
  float m = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += THREADS) m = fmaxf(m, row[c]);
  scratch[threadIdx.x] = m;
  __syncthreads();
  for (int s = THREADS / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) scratch[threadIdx.x] = fmaxf(scratch[threadIdx.x], scratch[threadIdx.x + s]);
    __syncthreads();
  }
  m = scratch[0];
  __syncthreads();
  float sum = 0.0f;
  for (int c = threadIdx.x; c < cols; c += THREADS) sum += expf(row[c] - m);
  scratch[threadIdx.x] = sum;
  __syncthreads();
  for (int s = THREADS / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) scratch[threadIdx.x] += scratch[threadIdx.x + s];
    __syncthreads();
  }
  float inv = 1.0f / scratch[0];
  for (int c = threadIdx.x; c < cols; c += THREADS) out[c] = expf(row[c] - m) * inv;
}

}  // namespace

extern "C" void evolve_reference(const float *x, float *y, int rows, int cols) {
  softmax_rows<<<rows, THREADS>>>(x, y, cols);
}
