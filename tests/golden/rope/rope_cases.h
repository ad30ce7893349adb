/* The rope goldens' cases, shared by tools/oracle/rope_golden.c (which writes tests/golden/rope/cache.bin
 * from llama.cpp's own ggml_rope_ext) and tests/test_cpu_ops.c (which compares the ROPE op with it bit
 * for bit).  Change a case and the golden must be regenerated.
 *
 * Each case ropes, at every position of rg_pos, one head of n_dims elements whose pairs are (1, 0): the
 * output pair is then exactly (cos, sin) of the angle times the magnitude scale, i.e. the rope's cache. */
#ifndef RG_ROPE_CASES_H
#define RG_ROPE_CASES_H

typedef struct {
    const char *name;
    int n_dims, mode;          /* mode 2 = NEOX (Qwen), 0 = normal */
    float freq_base;
    int scaling;               /* 0 none, 1 linear, 2 yarn (llama.cpp's rope_scaling_type) */
    float factor;              /* rope.scaling.factor: freq_scale = 1 / factor */
    int n_ctx_orig;            /* YaRN's original context length */
    float ext_factor;          /* < 0: llama.cpp's default (1 with yarn, 0 otherwise) */
    float beta_fast, beta_slow;
    float file_attn_factor;    /* <arch>.rope.scaling.attn_factor (1 when absent) */
} rg_case;

static const rg_case rg_cases[] = {
    {"plain-128", 128, 2, 1000000.0f, 0, 1.0f, 32768, -1.0f, 32.0f, 1.0f, 1.0f},
    {"linear-64", 64, 2, 10000.0f, 1, 2.0f, 4096, -1.0f, 32.0f, 1.0f, 1.0f},
    {"yarn4-128", 128, 2, 1000000.0f, 2, 4.0f, 32768, -1.0f, 32.0f, 1.0f, 1.0f},
    {"yarn4-64", 64, 2, 1000000.0f, 2, 4.0f, 32768, -1.0f, 32.0f, 1.0f, 1.0f},
    {"yarn8-128-base1e4", 128, 2, 10000.0f, 2, 8.0f, 4096, -1.0f, 32.0f, 1.0f, 1.0f},
    {"yarn2-128-ext0.5-beta16-2-attn1.2", 128, 2, 1000000.0f, 2, 2.0f, 32768, 0.5f, 16.0f, 2.0f, 1.2f},
    {"yarn4-64-normal", 64, 0, 1000000.0f, 2, 4.0f, 32768, -1.0f, 32.0f, 1.0f, 1.0f},
    {"yarn4-64-ctx256", 64, 2, 1000000.0f, 2, 4.0f, 256, -1.0f, 32.0f, 1.0f, 1.0f},
    {"yarn2.89-64", 64, 2, 1000000.0f, 2, 2.89f, 32768, -1.0f, 32.0f, 1.0f, 1.0f}, /* fma or not tells here */
};
#define RG_NCASES ((int)(sizeof rg_cases / sizeof rg_cases[0]))

static const int rg_pos[] = {0, 1, 2, 3, 7, 31, 100, 1000, 4095, 4096, 32767, 32768, 65535, 100000, 131071};
#define RG_NPOS ((int)(sizeof rg_pos / sizeof rg_pos[0]))

/* The ggml_rope_ext arguments llama.cpp's context derives from the file's rope values (llama-context.cpp,
 * commit 80fb11a, built without FMA contraction): freq_scale, ext_factor and attn_factor. */
static inline void rg_cparams(const rg_case *c, float *freq_scale, float *ext_factor, float *attn_factor) {
    float fs = c->scaling == 0 ? 1.0f : 1.0f / c->factor;
    float ext = c->ext_factor >= 0.0f ? c->ext_factor : c->scaling == 2 ? 1.0f : 0.0f;
    float attn = 1.0f;
    if (ext != 0.0f) {
        const float factor = 1.0f / fs;
        const float l = logf(factor);
        const float m = factor <= 1.0f ? 1.0f : (0.1f * 1.0f * l + 1.0f);
        const float cancel = 1.0f / (1.0f + 0.1f * l);
        attn = m * cancel;
    }
    attn *= c->file_attn_factor;
    *freq_scale = fs;
    *ext_factor = ext;
    *attn_factor = attn;
}

#endif
