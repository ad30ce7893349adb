// The CUDA runtime calls behind the CUDA backend's availability probe, its buffer hooks and the device memory
// query (compiled only with make CUDA=1).
#include <cuda_runtime.h>

#include "backend/cuda/cuda.h"

extern "C" int mf_cuda_device_count(int *count) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    *count = e == cudaSuccess ? n : 0;
    if (e != cudaSuccess) (void)cudaGetLastError(); /* a probe's answer, not an error for the next launch */
    return (int)e;
}

extern "C" int mf_cuda_malloc(size_t size, void **addr, const char **what) {
    cudaError_t e = cudaMalloc(addr, size ? size : 64);
    if (e == cudaSuccess) e = cudaMemset(*addr, 0, size ? size : 64);
    /* the memset is on the legacy stream: finish it before any other stream touches the buffer */
    if (e == cudaSuccess) e = cudaStreamSynchronize(cudaStreamLegacy);
    if (e != cudaSuccess) (void)cudaGetLastError(); /* reported by the caller; not left for the next launch */
    *what = cudaGetErrorString(e);
    return (int)e;
}

extern "C" void mf_cuda_free(void *addr) {
    if (addr) (void)cudaFree(addr);
}

extern "C" int mf_cuda_memcpy(void *dst, const void *src, size_t n, int kind, const char **what) {
    const cudaMemcpyKind k = kind == 0 ? cudaMemcpyHostToDevice : kind == 1 ? cudaMemcpyDeviceToHost
                                                                            : cudaMemcpyDeviceToDevice;
    cudaError_t e = cudaMemcpy(dst, src, n, k);
    /* cudaMemcpy from pageable memory returns once the bytes are staged, before the DMA lands, and the
     * runtime's compute stream is non-blocking (it does not wait for the legacy stream): wait here, so a
     * kernel enqueued after this call never reads the old bytes. */
    if (e == cudaSuccess && kind != 1) e = cudaStreamSynchronize(cudaStreamLegacy);
    if (e != cudaSuccess) (void)cudaGetLastError();
    *what = cudaGetErrorString(e);
    return (int)e;
}

extern "C" int mf_cuda_mem_query(size_t *free_b, size_t *total_b, int *code, const char **name) {
    *free_b = *total_b = 0;
    *code = 0;
    *name = "cudaSuccess";
    size_t f = 0, t = 0;
    cudaError_t e = cudaMemGetInfo(&f, &t);
    if (e == cudaErrorNotSupported) {
        (void)cudaGetLastError();
        return 1;
    }
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        *code = (int)e;
        *name = cudaGetErrorName(e);
        return 2;
    }
    if (t == 0) return 1;
    *free_b = f;
    *total_b = t;
    return 0;
}
