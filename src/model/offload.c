/* model/offload: the offload plan (rules in offload.h). */
#include "model/offload.h"

#include <stdio.h>
#include <string.h>

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

/* Weight bytes of blocks [0, k), plus the embeddings/output when with_io. */
static uint64_t weights(const mf_offload_in *in, int32_t k, bool with_io) {
    uint64_t s = with_io ? in->io_bytes : 0;
    for (int32_t i = 0; i < k; i++) s += in->block_bytes[i];
    return s;
}

/* The largest plan within `wb` bytes: a prefix of blocks, the embeddings/output only with all of them. */
static int32_t fit(const mf_offload_in *in, uint64_t wb, bool *io) {
    int32_t k = 0;
    uint64_t s = 0;
    while (k < in->n_layer && s + in->block_bytes[k] <= wb) s += in->block_bytes[k++];
    *io = k == in->n_layer && s + in->io_bytes <= wb;
    if (k == in->n_layer && !*io && k > 0) k--; /* every block means the embeddings/output too: one block fewer */
    return k;
}

int mf_offload_make_plan(const mf_offload_in *in, mf_offload_plan *out, mf_error *err) {
    memset(out, 0, sizeof *out);
    const int32_t M = in->n_layer;
    const char *dev = in->device ? in->device : "the device";
    char origin[96];
    if (in->origin) snprintf(origin, sizeof origin, "%s", in->origin);
    else if (in->request == MF_GPU_LAYERS_AUTO) snprintf(origin, sizeof origin, "n_gpu_layers auto");
    else if (in->request == MF_GPU_LAYERS_ALL) snprintf(origin, sizeof origin, "n_gpu_layers all");
    else snprintf(origin, sizeof origin, "n_gpu_layers %d", in->request);
    if (in->request < MF_GPU_LAYERS_AUTO || M < 0)
        return mf_err(err, MF_E_INVAL,
                      "%s is not a block count: give 0..%d blocks, all, or auto (a count above %d means every block)",
                      origin, M, M);
    const bool is_auto = in->request == MF_GPU_LAYERS_AUTO;
    if (in->request == 0 || (is_auto && in->unavailable)) {
        if (in->request == 0)
            snprintf(out->report, sizeof out->report, "offload: cpu only - 0 of %d blocks on %s (%s)", M, dev, origin);
        else
            snprintf(out->report, sizeof out->report, "offload: cpu only - 0 of %d blocks on %s (auto: %s is not usable "
                     "here: %s; %s)", M, dev, dev, in->unavailable, origin);
        return 0;
    }
    if (in->unavailable)
        return mf_err(err, MF_E_UNSUPPORTED, "%s asks for blocks on %s, which is not usable here: %s; use --gpu-layers 0",
                      origin, dev, in->unavailable);

    /* the budget, when there is a number for it */
    char src[200] = "";
    if (in->mem_override_mib) {
        out->budgeted = true;
        out->budget = in->mem_override_mib << 20;
        snprintf(src, sizeof src, "MINFER_GPU_MEM=%llu MiB", (unsigned long long)in->mem_override_mib);
    } else if (in->mem.outcome == MF_MEM_KNOWN) {
        out->budgeted = true;
        out->budget = in->mem.free_bytes / 4 * 3;
        snprintf(src, sizeof src, "three quarters of the %.1f MiB %s reports free of %.1f MiB", mib(in->mem.free_bytes),
                 dev, mib(in->mem.total_bytes));
    }
    out->reserve = out->budget / 4;
    out->weights_budget = out->budget - out->reserve;
    bool io_fit = false;
    const int32_t k_fit = out->budgeted ? fit(in, out->weights_budget, &io_fit) : 0;

    if (is_auto) {
        if (!out->budgeted) {
            if (in->mem.outcome == MF_MEM_FAILED)
                return mf_err(err, MF_E_UNSUPPORTED,
                              "%s needs the free memory of %s, and the device free-memory query failed with %s; set "
                              "MINFER_GPU_MEM=<MiB> (the budget auto fits into) or give a block count",
                              origin, dev, in->mem.why);
            return mf_err(err, MF_E_UNSUPPORTED,
                          "%s needs the free memory of %s, which is unknown (%s); set MINFER_GPU_MEM=<MiB> (the budget "
                          "auto fits into) or give a block count",
                          origin, dev, in->mem.why[0] ? in->mem.why : "no answer");
        }
        out->n_gpu = k_fit;
        out->io_gpu = io_fit;
    } else {
        const int32_t n = in->request == MF_GPU_LAYERS_ALL || in->request > M ? M : in->request;
        out->n_gpu = n;
        out->io_gpu = n == M;
        const uint64_t need = weights(in, n, out->io_gpu);
        if (out->budgeted && need > out->weights_budget) {
            char way[96];
            if (k_fit > 0) snprintf(way, sizeof way, "--gpu-layers %d fits", k_fit);
            else snprintf(way, sizeof way, "not even one block fits");
            return mf_err(err, MF_E_RANGE,
                          "%s puts %.1f MiB of weights on %s (%d of %d blocks%s), more than its weights budget of "
                          "%.1f MiB (%s, less %.1f MiB reserved for KV/activations); %s (or --gpu-layers auto; "
                          "MINFER_GPU_MEM=<MiB> sets the budget)",
                          origin, mib(need), dev, n, M, out->io_gpu ? " and the embeddings/output" : "",
                          mib(out->weights_budget), src, mib(out->reserve), way);
        }
    }
    out->device_bytes = weights(in, out->n_gpu, out->io_gpu);

    char why[400];
    if (is_auto)
        snprintf(why, sizeof why, "auto: %d of %d blocks fit - weights budget %.1f MiB, %.1f MiB reserved for "
                 "KV/activations; %s; %s", out->n_gpu, M, mib(out->weights_budget), mib(out->reserve), src, origin);
    else if (out->budgeted)
        snprintf(why, sizeof why, "within the %.1f MiB weights budget; %s", mib(out->weights_budget), origin);
    else
        snprintf(why, sizeof why, "not checked against device memory: %s%s; %s",
                 in->mem.outcome == MF_MEM_FAILED ? "the free-memory query failed with " : "",
                 in->mem.why[0] ? in->mem.why : "unknown", origin);
    if (out->n_gpu == 0)
        snprintf(out->report, sizeof out->report, "offload: cpu only - 0 of %d blocks on %s (%s)", M, dev, why);
    else
        snprintf(out->report, sizeof out->report, "offload: %d of %d blocks on %s, %d on cpu; embed/output on %s "
                 "(%.1f MiB of device weights; %s)", out->n_gpu, M, dev, M - out->n_gpu, out->io_gpu ? dev : "cpu",
                 mib(out->device_bytes), why);
    return 0;
}
