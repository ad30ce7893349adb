// The CUDA runtime call behind the CUDA backend's availability probe (compiled only with make CUDA=1).
#include <cuda_runtime.h>

extern "C" int mf_cuda_device_count(int *count) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    *count = e == cudaSuccess ? n : 0;
    return (int)e;
}

extern "C" int mf_cuda_malloc(size_t size, void **addr, const char **what) {
    cudaError_t e = cudaMalloc(addr, size ? size : 64);
    if (e == cudaSuccess) e = cudaMemset(*addr, 0, size ? size : 64);
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
    *what = cudaGetErrorString(e);
    return (int)e;
}
