/* MF_HD: a function the CUDA kernels call on the device and the host tests call on the host (qmath.h,
 * emath.h); plain C, so tests/test_cuda_*.c compile it in every build. */
#ifndef MF_BACKEND_CUDA_HD_H
#define MF_BACKEND_CUDA_HD_H

#ifdef __CUDACC__
#define MF_HD __host__ __device__ static inline
#else
#define MF_HD static inline
#endif

#endif
