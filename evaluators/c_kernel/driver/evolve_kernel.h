/* The contract between the c_kernel evaluator's driver and a task's harness.c.
 *
 * A harness adapts the evaluator's flat buffers to the kernel's own signature. It holds no
 * timing and no I/O: the driver (driver.c) owns `main`, and a trusted timer in another
 * process owns the clock. The inputs are the arrays of the task's reference.py
 * `make_inputs`, as raw bytes one after another; the output is the bytes of `reference`.
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

#endif
