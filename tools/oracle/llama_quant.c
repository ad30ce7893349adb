/* llama_quant - llama.cpp's own quantizer for the conformance goldens of llama.cpp-quantized files (dev-only).
 *
 *   bin/llama_quant quantize IN.gguf OUT.gguf FTYPE     llama_model_quantize with llama-quantize's defaults
 *                                                       (no imatrix, not --pure), FTYPE a name below
 *   bin/llama_quant hashes FILE.gguf                    one JSON array: [name, ggml type, FNV-1a 64 of the
 *                                                       tensor's bytes as 16 hex digits] per tensor, file order
 *
 * make_conformance_goldens.sh runs `quantize` on mf-genmodel's --type f16 file, records llama.cpp's logits on
 * the file it wrote and that file's `hashes` in the golden; tests/test_conformance.c regenerates the model with
 * `mf-genmodel --llama-quantize` and checks every tensor against those hashes (docs/CONFORMANCE.md,
 * "llama.cpp-quantized files").  Quantizing runs ggml-base's quantizers only (no CPU backend kernel), so no
 * CPU variant is pinned.
 * oracle-libs: -lllama -lggml -lggml-base */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "llama.h"

static const struct {
    const char *name;
    enum llama_ftype ftype;
} k_ftypes[] = {
    {"f16", LLAMA_FTYPE_MOSTLY_F16},       {"bf16", LLAMA_FTYPE_MOSTLY_BF16},     {"q8_0", LLAMA_FTYPE_MOSTLY_Q8_0},
    {"q4_0", LLAMA_FTYPE_MOSTLY_Q4_0},     {"q4_1", LLAMA_FTYPE_MOSTLY_Q4_1},     {"q5_0", LLAMA_FTYPE_MOSTLY_Q5_0},
    {"q5_1", LLAMA_FTYPE_MOSTLY_Q5_1},     {"q2_k", LLAMA_FTYPE_MOSTLY_Q2_K},     {"q3_k_s", LLAMA_FTYPE_MOSTLY_Q3_K_S},
    {"q3_k_m", LLAMA_FTYPE_MOSTLY_Q3_K_M}, {"q3_k_l", LLAMA_FTYPE_MOSTLY_Q3_K_L}, {"q4_k_s", LLAMA_FTYPE_MOSTLY_Q4_K_S},
    {"q4_k_m", LLAMA_FTYPE_MOSTLY_Q4_K_M}, {"q5_k_s", LLAMA_FTYPE_MOSTLY_Q5_K_S}, {"q5_k_m", LLAMA_FTYPE_MOSTLY_Q5_K_M},
    {"q6_k", LLAMA_FTYPE_MOSTLY_Q6_K},     {"iq4_nl", LLAMA_FTYPE_MOSTLY_IQ4_NL}, {"iq4_xs", LLAMA_FTYPE_MOSTLY_IQ4_XS},
    {"iq3_s", LLAMA_FTYPE_MOSTLY_IQ3_S},   {"iq3_m", LLAMA_FTYPE_MOSTLY_IQ3_M},
};

static void log_cb(enum ggml_log_level level, const char *text, void *ud) {
    (void)ud;
    if (level >= GGML_LOG_LEVEL_WARN && level != GGML_LOG_LEVEL_CONT) fputs(text, stderr);
}

static int usage(void) {
    fprintf(stderr, "usage: llama_quant quantize IN.gguf OUT.gguf FTYPE | llama_quant hashes FILE.gguf\nFTYPE:");
    for (size_t i = 0; i < sizeof k_ftypes / sizeof k_ftypes[0]; i++) fprintf(stderr, " %s", k_ftypes[i].name);
    fprintf(stderr, "\n");
    return 2;
}

static int cmd_quantize(const char *in, const char *out, const char *name) {
    size_t i = 0;
    while (i < sizeof k_ftypes / sizeof k_ftypes[0] && strcmp(k_ftypes[i].name, name)) i++;
    if (i == sizeof k_ftypes / sizeof k_ftypes[0]) {
        fprintf(stderr, "llama_quant: unknown FTYPE '%s'\n", name);
        return usage();
    }
    llama_log_set(log_cb, NULL);
    llama_backend_init();
    struct llama_model_quantize_params p = llama_model_quantize_default_params();
    p.ftype = k_ftypes[i].ftype;
    p.nthread = 2; /* rows are quantized independently: the thread count does not change the bytes */
    uint32_t rc = llama_model_quantize(in, out, &p);
    if (rc) fprintf(stderr, "llama_quant: llama_model_quantize(%s -> %s, %s) failed (%u)\n", in, out, name, rc);
    return rc ? 1 : 0;
}

static int cmd_hashes(const char *path) {
    struct gguf_init_params gp = {.no_alloc = true, .ctx = NULL};
    struct gguf_context *g = gguf_init_from_file(path, gp);
    if (!g) {
        fprintf(stderr, "llama_quant: cannot read %s as GGUF\n", path);
        return 1;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "llama_quant: cannot open %s\n", path);
        return 1;
    }
    const size_t base = gguf_get_data_offset(g);
    printf("[");
    for (int64_t t = 0; t < gguf_get_n_tensors(g); t++) {
        const size_t n = gguf_get_tensor_size(g, t);
        unsigned char *buf = malloc(n ? n : 1);
        if (!buf || fseek(f, (long)(base + gguf_get_tensor_offset(g, t)), SEEK_SET) || fread(buf, 1, n, f) != n) {
            fprintf(stderr, "llama_quant: cannot read tensor %s of %s\n", gguf_get_tensor_name(g, t), path);
            return 1;
        }
        uint64_t h = 0xcbf29ce484222325ull;
        for (size_t k = 0; k < n; k++) h = (h ^ buf[k]) * 0x100000001b3ull;
        free(buf);
        printf("%s[\"%s\",\"%s\",\"%016llx\"]", t ? "," : "", gguf_get_tensor_name(g, t),
               ggml_type_name(gguf_get_tensor_type(g, t)), (unsigned long long)h);
    }
    printf("]\n");
    fclose(f);
    gguf_free(g);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "quantize")) return cmd_quantize(argv[2], argv[3], argv[4]);
    if (argc == 3 && !strcmp(argv[1], "hashes")) return cmd_hashes(argv[2]);
    return usage();
}
