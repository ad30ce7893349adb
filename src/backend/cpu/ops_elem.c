/* CPU kernels for the row-wise ops: get_rows, rms_norm, add/mul (broadcast), scale, silu, swiglu,
 * softmax, rope, cont, hadamard.  Each thread owns a contiguous range of rows; every row is computed the same
 * way whatever the thread count, and numerics follow ggml-cpu's reference paths. */
#include "backend/cpu/cpu_impl.h"
#include "core/hadamard.h"
#include <stdlib.h>

static int32_t node_id(const mf_cpu_exec *ex, const mf_node *n) {
    return (int32_t)(n - mf_graph_node_c(ex->g, 0));
}

static const mf_node *src(const mf_cpu_exec *ex, const mf_node *n, int i) {
    return mf_graph_node_c(ex->g, n->src[i]);
}

/* A row of an x8 layout (a tied embedding read through the LM head's repacked copy, so the file's
 * token_embd pages are never touched again): back to the file layout, then the usual dequantizer. */
static void x8_row(uint32_t type, const void *data, int64_t K, int32_t row, float *y) {
    const uint32_t base = mf_repack_base(type);
    uint8_t stack[16384];
    const size_t rs = mf_row_size(base, K);
    uint8_t *tmp = rs <= sizeof stack ? stack : malloc(rs);
    if (!tmp) {
        memset(y, 0, (size_t)K * sizeof(float));
        return;
    }
    mf_unpack_row(type, data, tmp, K, row);
    mf_dequantize_row(base, tmp, y, K);
    if (tmp != stack) free(tmp);
}

void mf_cpu_op_get_rows(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth) {
    const mf_node *t = src(ex, n, 0), *ids = src(ex, n, 1);
    int64_t r0, r1, K = t->ne[0], R = t->ne[1];
    mf_cpu_split(n->ne[1], ith, nth, &r0, &r1);
    const int32_t *id = ids->data;
    const bool x8 = mf_type_get(t->type)->row_group > 1;
    for (int64_t r = r0; r < r1; r++) {
        float *y = (float *)((char *)n->data + (size_t)r * n->nb[1]);
        int32_t row = id[r];
        if (row < 0 || row >= R) {
            mf_cpu_fault_set(ex, ith, node_id(ex, n), "row id", r, row, R);
            memset(y, 0, (size_t)K * sizeof(float));
            continue;
        }
        if (x8) {
            x8_row(t->type, t->data, K, row, y);
            continue;
        }
        const char *x = (const char *)t->data + (size_t)row * t->nb[1];
        if (t->type == MF_TYPE_F32)
            memcpy(y, x, (size_t)K * sizeof(float));
        else
            mf_dequantize_row(t->type, x, y, K);
    }
}

/* Each row's sum of squares is ggml's chain (vec.sumsq), which is bound by the latency of its double adds:
 * MF_CPU_NORM_ROWS rows at a time run their chains side by side, each the same operations in the same
 * order as alone. */
void mf_cpu_op_rms_norm(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth) {
    const mf_node *a = src(ex, n, 0);
    const float eps = n->fparams[0];
    const int64_t ne0 = a->ne[0];
    const mf_node *f = mf_cpu_fused(ex, n), *b = f ? src(ex, f, 1) : NULL;
    int64_t r0, r1;
    mf_cpu_split(mf_cpu_nrows(n), ith, nth, &r0, &r1);
    const mf_cpu_vec *vec = &ex->cpu->vec;
    const int op = f ? (int)f->op : -1;
    for (int64_t rb = r0; rb < r1; rb += MF_CPU_NORM_ROWS) {
        const int nr = (int)MF_MIN(MF_CPU_NORM_ROWS, r1 - rb);
        const float *xs[MF_CPU_NORM_ROWS];
        double sum[MF_CPU_NORM_ROWS];
        for (int k = 0; k < nr; k++) xs[k] = (const float *)((const char *)a->data + mf_cpu_row_offs(a, rb + k));
        vec->sumsq(xs, nr, ne0, sum);
        for (int k = 0; k < nr; k++) {
            float *y = (float *)((char *)n->data + mf_cpu_row_offs(n, rb + k));
            const float mean = (float)(sum[k] / (double)ne0);
            const float scale = 1.0f / sqrtf(mean + eps);
            /* a fused ADD/MUL over the normalized row: the same two roundings as the two nodes */
            vec->scale_op(ne0, xs[k], scale, op, f ? mf_cpu_bcast_row(b, f, rb + k) : NULL, f && b->ne[0] == 1, y);
        }
    }
}

void mf_cpu_op_binary(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth) {
    const mf_node *a = src(ex, n, 0), *b = src(ex, n, 1);
    const int64_t ne0 = a->ne[0];
    int64_t r0, r1;
    mf_cpu_split(mf_cpu_nrows(n), ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1 = r % a->ne[1], i2 = (r / a->ne[1]) % a->ne[2], i3 = r / (a->ne[1] * a->ne[2]);
        const float *x = (const float *)((const char *)a->data + mf_cpu_row_offs(a, r));
        const float *z =
            (const float *)((const char *)b->data + (size_t)(i1 % b->ne[1]) * b->nb[1] +
                            (size_t)(i2 % b->ne[2]) * b->nb[2] + (size_t)(i3 % b->ne[3]) * b->nb[3]);
        float *y = (float *)((char *)n->data + mf_cpu_row_offs(n, r));
        ex->cpu->vec.bin_op(ne0, x, (int)n->op, z, b->ne[0] != ne0, y);
    }
}

void mf_cpu_op_unary(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth) {
    const mf_node *a = src(ex, n, 0);
    const int64_t ne0 = a->ne[0];
    const float s = n->fparams[0];
    int64_t r0, r1;
    mf_cpu_split(mf_cpu_nrows(n), ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const float *x = (const float *)((const char *)a->data + mf_cpu_row_offs(a, r));
        float *y = (float *)((char *)n->data + mf_cpu_row_offs(n, r));
        if (n->op == MF_OP_SCALE)
            for (int64_t i = 0; i < ne0; i++) y[i] = x[i] * s;
        else
            ex->cpu->vec.swiglu(ne0, x, NULL, y); /* silu */
    }
}

void mf_cpu_op_swiglu(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth) {
    const mf_node *a = src(ex, n, 0), *b = src(ex, n, 1);
    const int64_t ne0 = a->ne[0];
    int64_t r0, r1;
    mf_cpu_split(mf_cpu_nrows(n), ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const float *x = (const float *)((const char *)a->data + mf_cpu_row_offs(a, r));
        const float *u = (const float *)((const char *)b->data + mf_cpu_row_offs(b, r));
        float *y = (float *)((char *)n->data + mf_cpu_row_offs(n, r));
        ex->cpu->vec.swiglu(ne0, x, u, y);
    }
}

void mf_cpu_op_softmax(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth) {
    const mf_node *a = src(ex, n, 0);
    const int64_t ne0 = a->ne[0];
    int64_t r0, r1;
    mf_cpu_split(mf_cpu_nrows(n), ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const float *x = (const float *)((const char *)a->data + mf_cpu_row_offs(a, r));
        float *y = (float *)((char *)n->data + mf_cpu_row_offs(n, r));
        float max = -INFINITY;
        for (int64_t i = 0; i < ne0; i++) max = x[i] > max ? x[i] : max;
        const double sum = ex->cpu->vec.exp_sub(ne0, x, max, y); /* llama.cpp's order (vec.c) */
        const float inv = (float)(1.0 / sum);
        for (int64_t i = 0; i < ne0; i++) y[i] *= inv;
    }
}

size_t mf_cpu_rope_thread_bytes(const mf_node *n) {
    return (size_t)n->ne[0] * sizeof(float) + 64;
}

void mf_cpu_op_rope(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth) {
    const mf_node *a = src(ex, n, 0), *pos = src(ex, n, 1);
    const mf_rope rope = mf_node_rope(n);
    const int n_dims = rope.n_rot, mode = rope.mode;
    const float theta_scale = mf_rope_theta_scale(rope.freq_base, n_dims);
    const int64_t ne0 = a->ne[0], ne1 = a->ne[1];
    const int32_t *p = pos->data;
    float *cache = mf_cpu_thread_scratch(ex, ith);
    int64_t r0, r1, last_i2 = -1;
    mf_cpu_split(ne1 * a->ne[2], ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t i1 = r % ne1, i2 = r / ne1;
        if (i2 != last_i2) {
            mf_rope_cache(cache, n_dims, (float)p[i2], &rope, theta_scale, false);
            last_i2 = i2;
        }
        const float *x =
            (const float *)((const char *)a->data + (size_t)i1 * a->nb[1] + (size_t)i2 * a->nb[2]);
        float *y = (float *)((char *)n->data + (size_t)i1 * n->nb[1] + (size_t)i2 * n->nb[2]);
        /* the fused rotation (vec.rope, one fma per output as llama.cpp's build); core/rope.c's
         * mf_rope_row is the same rule in scalar fmaf for the KV shift, bitwise equal (test_cpu_ops) */
        ex->cpu->vec.rope(n_dims, mode == MF_ROPE_NEOX, cache, x, y);
        if (y != x && ne0 > n_dims) memcpy(y + n_dims, x + n_dims, (size_t)(ne0 - n_dims) * sizeof(float));
    }
}

void mf_cpu_op_cont(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth) {
    const mf_node *a = src(ex, n, 0);
    const size_t es = n->nb[0]; /* element size (cont is only built for non-block types) */
    const int64_t ne0 = a->ne[0];
    int64_t r0, r1;
    mf_cpu_split(mf_cpu_nrows(n), ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const char *x = (const char *)a->data + mf_cpu_row_offs(a, r);
        char *y = (char *)n->data + mf_cpu_row_offs(n, r);
        if (a->nb[0] == es) {
            memcpy(y, x, (size_t)ne0 * es);
        } else {
            for (int64_t i = 0; i < ne0; i++) memcpy(y + (size_t)i * es, x + (size_t)i * a->nb[0], es);
        }
    }
}

/* llama.cpp's attention rotation (core/hadamard.h): per row, each chunk of n through the fast transform */
void mf_cpu_op_hadamard(const mf_cpu_exec *ex, const mf_node *n, int ith, int nth) {
    const mf_node *a = src(ex, n, 0);
    int64_t r0, r1;
    mf_cpu_split(mf_cpu_nrows(n), ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++)
        mf_hadamard_row((float *)((char *)n->data + mf_cpu_row_offs(n, r)),
                        (const float *)((const char *)a->data + mf_cpu_row_offs(a, r)), a->ne[0], n->iparams[0]);
}
