// The CUDA runtime call behind the CUDA backend's availability probe (compiled only with make CUDA=1).
#include <cuda_runtime.h>

extern "C" int mf_cuda_device_count(int *count) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    *count = e == cudaSuccess ? n : 0;
    return (int)e;
}
