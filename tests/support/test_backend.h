/* A test-only second backend (linked into test binaries only, never into libminfer or minfer).
 *
 * Id MF_BACKEND_TEST_ID, name "test", priority 150 (above cpu, below cuda).  It claims ADD, MUL, SCALE and
 * SILU on f32 and runs them with its own plain C loops on host memory.  Its cross copy is deliberately
 * asynchronous: phase A only records the transfer and poisons the staging buffer with NaNs; the bytes
 * arrive at phase B - so a read before the await sees garbage, never the value. */
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
/* Counters: nodes executed, copies still awaiting their phase B. */
long mf_test_backend_nodes_run(void);
long mf_test_backend_in_flight(void);
/* The most copies in flight at once since the last reset (all of a boundary's inputs are enqueued
 * before any is awaited, so a boundary with k test-sourced inputs reaches k). */
long mf_test_backend_inflight_peak(void);
void mf_test_backend_reset_peak(void);

#endif
