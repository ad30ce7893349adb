/* Dev-only: writes the quant goldens (tests/golden/quant/) from llama.cpp's own prebuilt libraries.
 * Build and run: see tools/oracle/README-quant.md.  It links the haswell (AVX2+FMA+F16C) variant of
 * ggml-cpu: its x86 activation quantizers are the ones llama.cpp runs on every AVX2/AVX-512 machine,
 * and it runs on this (AVX2-only) dev VM.
 * oracle-libs: -lggml-base -lggml-cpu-haswell
 * oracle-cflags: -I../../tests/golden/quant */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "ggml-cpu.h"

#include "blockgen.h"

/* exported by libggml-base but absent from its type traits (Q8_K is an activation-only format) */
void dequantize_row_q8_K(const void *x, float *y, int64_t k);
void quantize_row_q8_K_ref(const float *x, void *y, int64_t k);

static const char *g_dir;

static void write_file(const char *name, const void *data, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
}

/* dequant goldens: ggml's to_float of the shared random blocks */
static void gen_dequant(void) {
    static uint8_t blocks[QG_N * 4];
    static float out[QG_N];
    for (int i = 0; i < QG_NTYPES; i++) {
        const qg_type *t = &qg_types[i];
        const struct ggml_type_traits *tr = ggml_get_type_traits((enum ggml_type)t->type);
        qg_fill(t->type, 1, QG_N, blocks);
        if (t->type == QG_F32) memcpy(out, blocks, sizeof out);
        else if (t->type == QG_Q8_K) dequantize_row_q8_K(blocks, out, QG_N);
        else tr->to_float(blocks, out, QG_N);
        char name[64];
        snprintf(name, sizeof name, "deq_%s.bin", t->name);
        write_file(name, out, sizeof out);
    }
}

/* quantizer goldens: ggml's *_ref quantizers and ggml-cpu's (x86) activation converters */
static void gen_quant(void) {
    static float x[QG_NQ];
    static uint8_t out[QG_NQ * 4];
    qg_floats(2, QG_NQ, x);
    const int ref_types[] = {QG_F16, QG_BF16, QG_Q8_0, QG_Q8_1, QG_Q4_0, QG_Q8_K};
    for (size_t i = 0; i < sizeof ref_types / sizeof ref_types[0]; i++) {
        const int ty = ref_types[i];
        const size_t sz = ggml_row_size((enum ggml_type)ty, QG_NQ);
        char name[64];
        memset(out, 0, sizeof out); /* q8_K_ref leaves bsums of an all-zero block unwritten */
        if (ty == QG_Q8_K) quantize_row_q8_K_ref(x, out, QG_NQ);
        else ggml_get_type_traits((enum ggml_type)ty)->from_float_ref(x, out, QG_NQ);
        snprintf(name, sizeof name, "quant_%s.bin", ggml_type_name((enum ggml_type)ty));
        write_file(name, out, sz);
        if (ty == QG_Q4_0) continue; /* not an activation format */
        memset(out, 0, sizeof out);
        ggml_get_type_traits_cpu((enum ggml_type)ty)->from_float(x, out, QG_NQ);
        snprintf(name, sizeof name, "act_%s.bin", ggml_type_name((enum ggml_type)ty));
        write_file(name, out, sz);
    }
}

/* llama.cpp's own dot products (its from_float + vec_dot, as its matmul runs them) */
static void gen_dot(void) {
    const int wtypes[] = {QG_F32,  QG_F16,  QG_BF16, QG_Q4_0, QG_Q4_1, QG_Q5_0,   QG_Q5_1,  QG_Q8_0,
                          QG_Q4_K, QG_Q5_K, QG_Q6_K, QG_Q2_K, QG_Q3_K, QG_IQ4_NL, QG_IQ4_XS};
    static float x[QG_DOT_N];
    static uint8_t w[QG_DOT_N * 4], a[QG_DOT_N * 4];
    qg_floats(3, QG_DOT_N, x);
    for (size_t i = 0; i < sizeof wtypes / sizeof wtypes[0]; i++) {
        const struct ggml_type_traits_cpu *tc = ggml_get_type_traits_cpu((enum ggml_type)wtypes[i]);
        memset(a, 0, sizeof a);
        ggml_get_type_traits_cpu(tc->vec_dot_type)->from_float(x, a, QG_DOT_N);
        float res[QG_DOT_ROWS];
        for (int r = 0; r < QG_DOT_ROWS; r++) {
            qg_fill(wtypes[i], 100 + (uint64_t)r, QG_DOT_N, w);
            tc->vec_dot(QG_DOT_N, &res[r], 0, w, 0, a, 0, 1);
        }
        char name[64];
        snprintf(name, sizeof name, "dot_%s.bin", ggml_type_name((enum ggml_type)wtypes[i]));
        write_file(name, res, sizeof res);
    }
}

/* The IQ4 kernels against activation quants of -128 (qg_fill_m128): dot_<type>_m128.bin, 16 rows. */
static void gen_dot_m128(void) {
    const int wtypes[] = {QG_IQ4_NL, QG_IQ4_XS};
    static uint8_t w[QG_DOT_N * 4], a[QG_DOT_N * 4];
    for (size_t i = 0; i < sizeof wtypes / sizeof wtypes[0]; i++) {
        const struct ggml_type_traits_cpu *tc = ggml_get_type_traits_cpu((enum ggml_type)wtypes[i]);
        qg_fill_m128((int)tc->vec_dot_type, 7, QG_DOT_N, a);
        float res[QG_DOT_ROWS];
        for (int r = 0; r < QG_DOT_ROWS; r++) {
            qg_fill(wtypes[i], 200 + (uint64_t)r, QG_DOT_N, w);
            tc->vec_dot(QG_DOT_N, &res[r], 0, w, 0, a, 0, 1);
        }
        char name[64];
        snprintf(name, sizeof name, "dot_%s_m128.bin", ggml_type_name((enum ggml_type)wtypes[i]));
        write_file(name, res, sizeof res);
    }
}

/* IQ4_NL with an odd block count (3, so the tail weighs as much as the pair): ggml's AVX2 kernel takes
 * blocks in pairs and the last one in its scalar tail: dot_iq4_nl_odd.bin, 16 rows of
 * from_float(qg_floats(seed 3, 96)) . qg_fill(iq4_nl, 300+r). */
static void gen_dot_odd(void) {
    enum { N = 96 };
    static float x[N];
    static uint8_t w[N * 4], a[N * 4];
    qg_floats(3, N, x);
    const struct ggml_type_traits_cpu *tc = ggml_get_type_traits_cpu(GGML_TYPE_IQ4_NL);
    ggml_get_type_traits_cpu(tc->vec_dot_type)->from_float(x, a, N);
    float res[QG_DOT_ROWS];
    for (int r = 0; r < QG_DOT_ROWS; r++) {
        qg_fill(QG_IQ4_NL, 300 + (uint64_t)r, N, w);
        tc->vec_dot(N, &res[r], 0, w, 0, a, 0, 1);
    }
    write_file("dot_iq4_nl_odd.bin", res, sizeof res);
}

/* conversion tables, hashed: every f16 -> f32, and the rounding probes f32 -> f16 / bf16 */
static void gen_fp16(void) {
    uint64_t h16 = QG_HASH0, hb16 = QG_HASH0, h32 = QG_HASH0, hb32 = QG_HASH0;
    for (uint32_t i = 0; i < 65536; i++) {
        ggml_fp16_t h = (ggml_fp16_t)i;
        float f = ggml_fp16_to_fp32(h);
        h32 = qg_hash(h32, &f, 4);
        ggml_bf16_t b = {(uint16_t)i};
        f = ggml_bf16_to_fp32(b);
        hb32 = qg_hash(hb32, &f, 4);
    }
    for (int i = 0; i < QG_NPROBE; i++) {
        float f = qg_probe(i);
        ggml_fp16_t h = ggml_fp32_to_fp16(f);
        h16 = qg_hash(h16, &h, 2);
        ggml_bf16_t b = ggml_fp32_to_bf16(f);
        hb16 = qg_hash(hb16, &b.bits, 2);
    }
    char txt[512];
    int n = snprintf(txt, sizeof txt,
                     "fp16_to_fp32 %016llx\nfp32_to_fp16 %016llx\nbf16_to_fp32 %016llx\nfp32_to_bf16 %016llx\n",
                     (unsigned long long)h32, (unsigned long long)h16, (unsigned long long)hb32,
                     (unsigned long long)hb16);
    write_file("fp16.txt", txt, (size_t)n);
}

int main(int argc, char **argv) {
    g_dir = argc > 1 ? argv[1] : "tests/golden/quant";
    ggml_cpu_init();
    gen_dequant();
    gen_quant();
    gen_dot();
    gen_dot_m128();
    gen_dot_odd();
    gen_fp16();
    printf("quant goldens written to %s\n", g_dir);
    return 0;
}
