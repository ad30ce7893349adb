/* A test-only second backend (linked into test binaries only, never into libminfer or minfer).
 *
 * Id MF_BACKEND_TEST_ID, name "test", priority 150 (above cpu, below cuda).  It claims ADD, MUL, SCALE and
 * SILU on f32; in layer mode (mf_test_backend_set_layer_ops) also everything one transformer block needs
 * with f32 weights (RMS_NORM, MATMUL with an f32 matrix, GET_ROWS of f32 rows, SWIGLU, SOFTMAX, ROPE,
 * CONT, ATTENTION, KV_STORE into an f32/f16 cache) - a quantized matrix placed on it is refused.
 *
 * Its memory is NOT host memory: buffers live in a private table and the addresses it hands out are
 * tagged, non-canonical values (0xa5e... | slot << 36 | offset) that fault on any dereference; only its
 * hooks and its compute translate them.  Its compute runs each node with the CPU's kernels over the
 * translated bytes (so split runs are bitwise the CPU-only run) and refuses, naming the nodes, a source
 * that is not its memory - a value of another backend that reached it without a staged copy.
 *
 * Its cross copy is deliberately asynchronous: phase A only records the transfer and poisons a host
 * staging buffer with NaNs; the bytes arrive at phase B - so a read before the await sees garbage. */
#ifndef MF_TEST_BACKEND_H
#define MF_TEST_BACKEND_H

#include "backend/registry.h"

#define MF_TEST_BACKEND_PRIORITY 150

/* Register the test backend (before anything uses the registry). */
int mf_test_backend_register(mf_error *err);
/* The test backend's own op x dtype support function. */
bool mf_test_backend_supports(mf_op op, uint32_t type);
/* Knobs: decline every copy_cross (the scheduler then does blocking copies); report unavailable with
 * `reason` (NULL = available). */
void mf_test_backend_set_decline(bool on);
void mf_test_backend_set_unavailable(const char *reason);
/* Layer mode: also claim the ops of a transformer block with f32 weights (see above). */
void mf_test_backend_set_layer_ops(bool on);
/* Is addr (inside) a live test-backend buffer?  Buffers allocated and not yet freed. */
bool mf_test_backend_owns(const void *addr);
long mf_test_backend_live_buffers(void);
/* Counters: nodes executed, copies still awaiting their phase B. */
long mf_test_backend_nodes_run(void);
long mf_test_backend_in_flight(void);
/* The most copies in flight at once since the last reset (all of a boundary's inputs are enqueued
 * before any is awaited, so a boundary with k test-sourced inputs reaches k). */
long mf_test_backend_inflight_peak(void);
void mf_test_backend_reset_peak(void);

#endif
