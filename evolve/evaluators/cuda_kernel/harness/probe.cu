// Trusted GPU probe: is a CUDA device usable from here, and which one. No kernels, so it
// runs on any architecture. Prints `device <cc major>.<cc minor> <name>` per device and
// exits 0, or prints the CUDA error and exits 3.
#include <cuda_runtime.h>
#include <stdio.h>

int main(void) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    printf("error %s\n", cudaGetErrorString(status));
    return 3;
  }
  if (count < 1) {
    printf("error the driver reports 0 devices\n");
    return 3;
  }
  for (int i = 0; i < count; i++) {
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    printf("device %d.%d %s\n", prop.major, prop.minor, prop.name);
  }
  return 0;
}
