/* The offload flags every model-loading command shares: --gpu-layers N|all|auto (llama.cpp's -ngl and
 * --n-gpu-layers), MINFER_GPU_LAYERS, and the report line after the load. */
#include "backend/registry.h"
#include "cli/cli.h"
#include "core/env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void mf_arg_gpu_init(mf_arg_gpu *g) {
    memset(g, 0, sizeof *g);
}

/* "N", "all" or "auto" -> the public request, or false */
static bool parse(const char *v, int32_t *out) {
    if (!strcasecmp(v, "all")) return *out = MF_GPU_LAYERS_ALL, true;
    if (!strcasecmp(v, "auto")) return *out = MF_GPU_LAYERS_AUTO, true;
    if (!*v || strlen(v) > 7) return false; /* 0..1000000 */
    for (const char *p = v; *p; p++)
        if (*p < '0' || *p > '9') return false;
    long n = strtol(v, NULL, 10);
    if (n > 1000000) return false;
    *out = (int32_t)n;
    return true;
}

int mf_arg_gpu_flag(int argc, char **argv, int *i, mf_arg_seen *seen, mf_arg_gpu *g) {
    const char *a = argv[*i], *v;
    if (strcmp(a, "-ngl") && strcmp(a, "--gpu-layers") && strcmp(a, "--n-gpu-layers")) return 0;
    if (!(v = mf_arg_value(argc, argv, i)) || !mf_arg_once(seen, "-ngl/--gpu-layers/--n-gpu-layers", v)) return -1;
    if (!parse(v, &g->n)) {
        fprintf(stderr, "Error: %s %s is not a block count: give a number 0..1000000 (blocks on the GPU; above the "
                "model's block count means all of them), all, or auto (as many as fit the device memory)\n",
                a, *v ? v : "''");
        return -1;
    }
    g->given = true;
    snprintf(g->origin, sizeof g->origin, "%s %s", a, v);
    return 1;
}

bool mf_arg_gpu_resolve(mf_arg_gpu *g, mf_model_params *mp) {
    const bool named = mf_backend_fence()->requested[MF_BACKEND_ID_CUDA];
    if (!g->given) {
        mf_error err = {0};
        int64_t n = 0;
        bool set = false;
        if (mf_env_count("MINFER_GPU_LAYERS", &n, &set, &err)) {
            fprintf(stderr, "Error: %s\n", err.msg);
            return false;
        }
        if (set) {
            g->n = (int32_t)n;
            g->given = true;
            snprintf(g->origin, sizeof g->origin, "MINFER_GPU_LAYERS=%s", getenv("MINFER_GPU_LAYERS"));
        } else if (named) {
            /* the device was asked for by name: as many blocks as fit, never a silent CPU run */
            g->n = MF_GPU_LAYERS_AUTO;
            snprintf(g->origin, sizeof g->origin, "cuda named, no --gpu-layers: auto");
        }
    }
    if (named && g->given && g->n == 0) {
        fprintf(stderr, "Error: cuda is named by --backend / MINFER_BACKENDS, but %s puts no block on it (the run "
                "would be CPU only); give --gpu-layers N, all or auto, or leave cuda out of the backends\n", g->origin);
        return false;
    }
    mp->n_gpu_layers = g->n;
    mp->gpu_layers_origin = g->origin[0] ? g->origin : NULL;
    return true;
}

bool mf_arg_gpu_report(const mf_arg_gpu *g, const mf_model *model) {
    mf_model_info info;
    mf_model_get_info(model, &info);
    if (info.offload_report && info.offload_report[0]) fprintf(stderr, "%s\n", info.offload_report);
    if (mf_backend_fence()->requested[MF_BACKEND_ID_CUDA] && info.n_gpu_layers == 0 && !info.gpu_io) {
        fprintf(stderr, "Error: cuda is named by --backend / MINFER_BACKENDS, but %s placed no block on it (the run "
                "would be CPU only); free device memory, set MINFER_GPU_MEM=<MiB>, give --gpu-layers N, or leave cuda "
                "out of the backends\n", g->origin[0] ? g->origin : "the offload plan");
        return false;
    }
    return true;
}
