// static: include
// Reads a file at compile time through the preprocessor.
#include "/etc/hostname"
// EVOLVE-BLOCK-START
extern "C" void softmax(const float *x, float *y, int rows, int cols) {}
// EVOLVE-BLOCK-END
