/* Dev-only: writes tests/golden/rope/cache.bin, llama.cpp's own rope (ggml_rope_ext on the prebuilt
 * ggml-cpu) for the cases of tests/golden/rope/rope_cases.h: plain, linear and YaRN ropes at positions up
 * to 131071.  tests/test_cpu_ops compares minfer's ROPE op with it bit for bit.
 *   tools/oracle/build.sh rope_golden && tools/oracle/bin/rope_golden tests/golden/rope/cache.bin
 * The haswell variant is the one every AVX2/AVX-512 machine's ggml-cpu rounds like (FMA contraction).
 * oracle-libs: -lggml-base -lggml-cpu-haswell -lm
 * oracle-cflags: -I../../tests/golden/rope */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "ggml-cpu.h"

#include "rope_cases.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT.bin\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "wb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    for (int ci = 0; ci < RG_NCASES; ci++) {
        const rg_case *c = &rg_cases[ci];
        struct ggml_init_params ip = {.mem_size = 64 << 20, .mem_buffer = NULL, .no_alloc = false};
        struct ggml_context *ctx = ggml_init(ip);
        struct ggml_tensor *x = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, c->n_dims, 1, RG_NPOS);
        struct ggml_tensor *pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, RG_NPOS);
        float *xd = x->data;
        for (int t = 0; t < RG_NPOS; t++) {
            ((int32_t *)pos->data)[t] = rg_pos[t];
            for (int i = 0; i < c->n_dims / 2; i++) {
                const int i0 = c->mode == 2 ? i : 2 * i, i1 = c->mode == 2 ? i + c->n_dims / 2 : 2 * i + 1;
                xd[t * c->n_dims + i0] = 1.0f;
                xd[t * c->n_dims + i1] = 0.0f;
            }
        }
        float fs, ext, attn;
        rg_cparams(c, &fs, &ext, &attn);
        struct ggml_tensor *y = ggml_rope_ext(ctx, x, pos, NULL, c->n_dims, c->mode, c->n_ctx_orig, c->freq_base, fs,
                                              ext, attn, c->beta_fast, c->beta_slow);
        struct ggml_cgraph *gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, y);
        if (ggml_graph_compute_with_ctx(ctx, gf, 1) != GGML_STATUS_SUCCESS) {
            fprintf(stderr, "compute failed for %s\n", c->name);
            return 1;
        }
        const size_t n = (size_t)c->n_dims * RG_NPOS;
        if (fwrite(y->data, sizeof(float), n, f) != n) {
            perror("fwrite");
            return 1;
        }
        printf("%-36s fs %g ext %g attn %.9g: %zu floats\n", c->name, fs, ext, attn, n);
        ggml_free(ctx);
    }
    if (fclose(f)) {
        perror("fclose");
        return 1;
    }
    return 0;
}
