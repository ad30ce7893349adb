/* Internal to src/backend: each backend module's registration entry.  registry.c is the only caller. */
#ifndef MF_BACKEND_ENTRIES_H
#define MF_BACKEND_ENTRIES_H

#include "backend/registry.h"

const mf_backend_entry *mf_cpu_entry(void); /* backend/cpu_entry.c */
#if MF_CUDA
const mf_backend_entry *mf_cuda_entry(void); /* backend/cuda/cuda_entry.c (compiled only with make CUDA=1) */
#endif

#endif
