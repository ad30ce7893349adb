/* The CUDA backend (compiled only with `make CUDA=1`).  Today a stub: it registers (id 2, priority 200),
 * probes for a device and honours MINFER_DISABLE_CUDA, and claims no op yet - so assignment never
 * places a node on it and a CUDA build computes on the CPU. */
#ifndef MF_BACKEND_CUDA_H
#define MF_BACKEND_CUDA_H

#include "graph/graph.h"

/* The CUDA op x dtype support function (claims nothing yet). */
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
/* kind: 0 host -> device, 1 device -> host, 2 device -> device (synchronous) */
int mf_cuda_memcpy(void *dst, const void *src, size_t n, int kind, const char **what);
#endif

#endif
