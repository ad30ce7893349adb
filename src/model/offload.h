/* model/offload: which transformer blocks a GPU runs (`--gpu-layers N|all|auto`), as a pure function of sizes
 * (no device, no file: tests/test_offload.c checks it on the CPU).
 *
 * The plan: blocks 0 .. n_gpu-1 on the device, the rest on the CPU (the reference design's order: the
 * device takes a prefix of the blocks); the embeddings, output norm and LM head go to the device only when
 * every block does (llama.cpp's n_gpu_layers > n_layer convention) - the LM head is a large share of a
 * small model's bytes, so a full offload must include it.  A count above the block count means every
 * block (as llama.cpp's -ngl 999).
 *
 * The budget (auto, and the fit check of a count): MINFER_GPU_MEM MiB when set, else three quarters of
 * the device's free memory; a quarter of that budget is reserved for the KV cache, activations and
 * scratch, the rest is the weights budget.  auto takes the largest prefix of blocks whose bytes fit the
 * weights budget (stopping at the first block that does not: no knapsack), and the embeddings/output
 * only with every block and only if they fit too (else one block fewer, so the rule above holds).  A count
 * whose weights exceed the weights budget is refused, naming the numbers and the largest count that
 * fits.  When the device cannot say how much memory it has (unknown) or the query failed, a count is
 * taken unchecked (the report says so) and auto is refused unless MINFER_GPU_MEM gives the number. */
#ifndef MF_MODEL_OFFLOAD_H
#define MF_MODEL_OFFLOAD_H

#include "backend/registry.h"
#include "core/core.h"

typedef struct {
    int32_t request;           /* N >= 0 blocks, MF_GPU_LAYERS_ALL or MF_GPU_LAYERS_AUTO (minfer.h) */
    const char *origin;        /* how it was given, for the report ("--gpu-layers 20"); NULL: "n_gpu_layers N" */
    const char *device;        /* the device backend's name ("cuda") */
    const char *unavailable;   /* NULL when the device is usable, else why not (auto then plans 0 blocks) */
    int32_t n_layer;
    const uint64_t *block_bytes; /* [n_layer]: each block's weight bytes */
    uint64_t io_bytes;         /* token embeddings + output norm + LM head (once when tied) */
    mf_mem_info mem;           /* the device's answer */
    uint64_t mem_override_mib; /* MINFER_GPU_MEM; 0 = unset */
} mf_offload_in;

typedef struct {
    int32_t n_gpu;          /* blocks 0 .. n_gpu-1 on the device */
    bool io_gpu;            /* embeddings / output norm / LM head on the device */
    uint64_t device_bytes;  /* weight bytes the plan puts on the device */
    bool budgeted;          /* a budget was known (override or a known answer) */
    uint64_t budget, reserve, weights_budget; /* bytes: budget = reserve + weights_budget */
    char report[1024];      /* the one line: "offload: 20 of 24 blocks on cuda, 4 on cpu; ..." */
} mf_offload_plan;

/* The plan, or a refusal (MF_E_INVAL bad request, MF_E_RANGE a count that does not fit, MF_E_UNSUPPORTED
 * auto without a number) naming the values and the way out. */
int mf_offload_make_plan(const mf_offload_in *in, mf_offload_plan *out, mf_error *err);

#endif
