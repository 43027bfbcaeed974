/* The contract between the c_kernel evaluator's driver and a task's harness.c.
 *
 * A harness adapts the evaluator's two buffers to the kernel's own signature. It holds no
 * timing and no I/O: the driver (driver.c) owns `main`, and a trusted timer in another
 * process owns the clock. A task that gives `signature:` gets a harness written by the
 * evaluator; a hand-written one uses the functions below.
 *
 * The layout of both buffers: the inputs buffer holds the arrays of the task's reference.py
 * `make_inputs`, the output buffer those of `reference`, in order, as raw bytes of their
 * declared dtypes (float32 where the task declares none). Array 0 starts at offset 0, and
 * every later array at the first multiple of 64 bytes at or after the end of the one before
 * (zero bytes between). Both buffers start page-aligned, so every array is 64-byte aligned.
 * Every output byte starts as 0xff on every call (NaN as a float): write every element.
 */
#ifndef EVOLVE_KERNEL_H
#define EVOLVE_KERNEL_H

#include <stddef.h>

/* Called once before any call, with the `key=value` size arguments the task declares. */
void evolve_setup(int argc, char **argv);

/* One kernel call: read `inputs`, write every byte of `output`. */
void evolve_call(const void *inputs, void *output);

/* The value of size `key` in argv (`key=value`); exits with a message when it is missing. */
long evolve_size(int argc, char **argv, const char *key);

/* Input array `index` (0-based, in make_inputs' order) within `inputs`, by the layout above;
 * exits with a message when there is no such array. */
const void *evolve_input(const void *inputs, int index);

/* Output array `index` (0-based, in the order `reference` returns them) within `output`. */
void *evolve_output(void *output, int index);

#endif
