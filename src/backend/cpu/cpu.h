/* The CPU backend: executes every graph op with a persistent threadpool.  An op/type it cannot execute
 * is refused with the node named (never skipped). */
#ifndef MF_BACKEND_CPU_H
#define MF_BACKEND_CPU_H

#include "graph/graph.h"

typedef struct mf_cpu mf_cpu;

int mf_cpu_new(int n_threads, mf_cpu **out, mf_error *err);
void mf_cpu_free(mf_cpu *cpu);
int mf_cpu_n_threads(const mf_cpu *cpu);
/* Runs fn(arg, ith, nth) on nth of the backend's threads, the caller as ith = 0 (nth clamped to 1..n_threads),
 * and returns when all have returned: work between forwards that the engine spreads over the same cores (the
 * samplers of several generators, mf_gen_batch_sample).  Not during a compute. */
void mf_cpu_run(mf_cpu *cpu, void (*fn)(void *arg, int ith, int nth), void *arg, int nth);
/* The op x dtype support function: `type` is the node's own type, except for MATMUL and GET_ROWS where
 * it is src0's (the weight/table) type.  The registry asks this; it keeps no copy.  KV_STORE's type is the
 * cache type (f32, f16, bf16, q8_0); ATTENTION (type f32) reads K/V caches of exactly those types. */
bool mf_cpu_supports(mf_op op, uint32_t type);
/* Execute nodes [0, n) in order (the graph must be allocated and its INPUT nodes bound). */
int mf_cpu_compute(mf_cpu *cpu, mf_graph *g, mf_error *err);
/* Execute nodes [first, last) only (a scheduler split).  Nodes outside the range are neither run nor
 * touched: their data pointers are read as they are (e.g. staged copies of another backend's values).
 * Views inside the range are re-resolved from their root's current data pointer. */
int mf_cpu_compute_range(mf_cpu *cpu, mf_graph *g, int32_t first, int32_t last, mf_error *err);

#endif
