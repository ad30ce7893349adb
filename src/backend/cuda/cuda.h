/* The CUDA backend (compiled only with `make CUDA=1`): its registration entry (cuda_entry.c), the device
 * probe and memory calls (probe.cu) and the runtime (runtime.cu: stream, scratch, the node loop, CUDA
 * graphs of the decode step).  The launchers it runs are declared in ops.h. */
#ifndef MF_BACKEND_CUDA_H
#define MF_BACKEND_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

#include "graph/graph.h"

/* The CUDA op x dtype support function (support.c): what the backend's code claims, the same answer on
 * every build (docs/SUPPORT-MATRIX.md); nothing reaches a backend that is not registered and available. */
bool mf_cuda_supports(mf_op op, uint32_t type);
/* NULL when a CUDA device is usable here, else the reason (MINFER_DISABLE_CUDA set, or no device). */
const char *mf_cuda_unavailable(void);
#if MF_CUDA
/* cudaGetDeviceCount through the runtime (probe.cu): 0 and *count, or the cudaError_t value. */
int mf_cuda_device_count(int *count);
/* The memory calls behind the buffer hooks (probe.cu): 0, or the cudaError_t value; *what gets
 * cudaGetErrorString's words. */
int mf_cuda_malloc(size_t size, void **addr, const char **what);
void mf_cuda_free(void *addr);
/* kind: 0 host -> device, 1 device -> host, 2 device -> device.  Complete on return (also a pageable
 * host -> device copy, whose DMA cudaMemcpy alone may leave in flight), so compute on any stream sees it. */
int mf_cuda_memcpy(void *dst, const void *src, size_t n, int kind, const char **what);
/* The device memory query (cudaMemGetInfo on the current device): 0 known (*free_b, *total_b set), 1 unknown
 * (the call succeeded but the device reports no total, as unified-memory parts may, or the query is not
 * supported), 2 failed (*code the cudaError_t, *name its name, e.g. cudaErrorIllegalAddress). */
int mf_cuda_mem_query(size_t *free_b, size_t *total_b, int *code, const char **name);

/* ---- runtime.cu: one pool per scheduler context ---- */
typedef struct mf_cuda_pool mf_cuda_pool;
/* graphs: capture/replay decode-sized ranges (MINFER_CUDA_GRAPHS, default on). */
int mf_cuda_pool_new(bool graphs, mf_cuda_pool **out, mf_error *err);
void mf_cuda_pool_free(mf_cuda_pool *p);
int mf_cuda_pool_compute(mf_cuda_pool *p, mf_graph *g, int32_t first, int32_t last, mf_error *err);
/* Waits for everything enqueued; an asynchronous kernel failure is reported here, naming the last range. */
int mf_cuda_pool_sync(mf_cuda_pool *p, mf_error *err);
/* Host <-> device on the pool's stream: write is enqueued (ordered before later compute), read waits. */
int mf_cuda_pool_write(mf_cuda_pool *p, void *dst, const void *src, size_t n, mf_error *err);
int mf_cuda_pool_read(mf_cuda_pool *p, const void *src, void *dst, size_t n, mf_error *err);
/* Cross copy phase A: device -> host staging on the stream plus an event (*ticket); phase B waits on it. */
int mf_cuda_pool_copy_out(mf_cuda_pool *p, const void *src, void *dst, size_t n, void **ticket, mf_error *err);
int mf_cuda_pool_await(mf_cuda_pool *p, void *ticket, mf_error *err);
/* Counters (captures made, replays launched, ranges run uncaptured) for the device checks. */
void mf_cuda_pool_graph_stats(const mf_cuda_pool *p, uint64_t *captures, uint64_t *replays, uint64_t *uncaptured);
#endif

#ifdef __cplusplus
}
#endif

#endif
