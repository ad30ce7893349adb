/* Model loading, last step: copy the CPU's matmul weights out of the file mapping into one buffer of huge
 * pages, in their x8/x16 layouts where they have one (quant/repack.c), on several threads.  A MoE model's
 * expert stacks too, expert by expert: matmul_id runs the same kernels as matmul, and a decode step reads 8 of
 * 128 experts, each from pages the model may not have touched yet (from the mapping, a page fault per 4 KiB of
 * every expert the first time a token chose it).
 *
 * Why the others too (F16, BF16, Q2_K, Q3_K, the IQ2/IQ3 types): decode streams every weight once per
 * token, and from the file mapping's 4 KiB pages that costs a TLB miss per 4 KiB; from 2 MiB pages it does
 * not (Qwen2.5-0.5B F16, 2 threads: decode +13 %; the copy adds ~0.35 s to its load).  Only where the
 * kernel gives huge pages (mf_huge_pages_advisable), else the copy would buy nothing.
 *
 * Why threads: a load is mostly this copy plus the kernel zeroing the fresh pages it writes (perf of a
 * Qwen2.5-0.5B Q8_0 load: 29 % mf_repack_as, 37 % clear_page), and both run on whichever thread touches
 * the memory first, so splitting the rows splits both.  The output does not depend on the split: every
 * item writes its own rows. */
#include "model/model_impl.h"

#include "backend/registry.h"
#include "core/threadpool.h"
#include "quant/quant.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Drop the file pages of [p, p + n) from this process (whole pages inside the range only, so a page that
 * also holds bytes another thread is still reading stays): the data was copied and is never read again,
 * so it should not count in resident memory. */
static void release_pages(const void *p, size_t n) {
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)p + pg - 1) / pg * pg, b = ((uintptr_t)p + n) / pg * pg;
    if (b > a) {
        (void)madvise((void *)a, b - a, MADV_DONTNEED);
        /* if something reads here again (GET_ROWS over a tied token_embd), fault in only the pages it
         * touches, not the 64 KiB the kernel maps around each fault by default */
        (void)madvise((void *)a, b - a, MADV_RANDOM);
    }
}

/* One unit of work: rows [r0, r0 + nr) of matrix i, whole row groups, about ITEM_BYTES of source.  Small
 * enough that the threads finish together and that the file pages and their copy coexist only for the
 * items in flight (the peak resident memory of a load stays near the file size); large enough that
 * taking one costs nothing. */
enum { ITEM_BYTES = 2u << 20 };

typedef struct {
    int32_t i;
    int64_t r0, nr;
} repack_item;

typedef struct {
    const mf_gguf_tensor *const *from; /* the originals, in the order of to[] */
    const mf_gguf_tensor *to;          /* their copies: layout type and destination */
    const repack_item *items;
    int n_items;
    atomic_int next;   /* the next item to take */
    atomic_int failed; /* 1 + the matrix whose repack failed, or 0 */
} repack_job;

static void repack_one(repack_job *j, const repack_item *it) {
    const mf_gguf_tensor *t = j->from[it->i], *c = &j->to[it->i];
    const size_t rs = mf_row_size(t->type, t->ne[0]);
    const char *src = (const char *)t->data + (size_t)it->r0 * rs;
    char *dst = (char *)c->data + (size_t)it->r0 * rs;
    if (c->type == t->type)
        memcpy(dst, src, (size_t)it->nr * rs); /* moved only */
    else if (mf_repack_as(c->type, t->type, src, dst, t->ne[0], it->nr)) {
        int none = 0;
        atomic_compare_exchange_strong(&j->failed, &none, it->i + 1);
        return;
    }
    release_pages(src, (size_t)it->nr * rs);
}

static void repack_worker(void *ctx, int ith, int nth) {
    (void)ith, (void)nth;
    repack_job *j = ctx;
    for (;;) {
        const int k = atomic_fetch_add(&j->next, 1);
        if (k >= j->n_items || atomic_load(&j->failed)) return;
        repack_one(j, &j->items[k]);
    }
}

/* The items of every matrix, in order (the first items are the first rows of the first matrix). */
static repack_item *plan_items(const mf_gguf_tensor *const *from, const mf_gguf_tensor *to, int k, int *n_out) {
    int n = 0, cap = 0;
    repack_item *items = NULL;
    for (int i = 0; i < k; i++) {
        const mf_gguf_tensor *t = from[i];
        const int64_t N = t->ne[1] * t->ne[2], R = to[i].type == t->type ? 1 : mf_type_get(to[i].type)->row_group;
        const int64_t rs = (int64_t)mf_row_size(t->type, t->ne[0]);
        const int64_t step = MF_MAX(R, (int64_t)ITEM_BYTES / rs / R * R);
        for (int64_t r0 = 0; r0 < N; r0 += step) {
            if (n == cap) {
                cap = cap ? 2 * cap : 256;
                repack_item *grown = realloc(items, (size_t)cap * sizeof *items);
                if (!grown) {
                    free(items);
                    return NULL;
                }
                items = grown;
            }
            items[n++] = (repack_item){i, r0, MF_MIN(step, N - r0)};
        }
    }
    *n_out = n;
    return items;
}

/* Run the job on n_threads threads (the caller one of them). */
static int run_job(repack_job *j, int n_threads, mf_error *err) {
    if (n_threads <= 1 || j->n_items <= 1) {
        repack_worker(j, 0, 1);
        return 0;
    }
    mf_threadpool *tp = NULL;
    const int nth = MF_MIN(n_threads, j->n_items);
    int rc = mf_threadpool_new(nth, &tp, err);
    if (rc) return mf_err_prefix(err, rc, "repacking the weights on %d threads", nth);
    mf_threadpool_run(tp, repack_worker, j, nth);
    mf_threadpool_free(tp);
    return 0;
}

/* The matrix slots the CPU copies: every layer it runs, and the LM head when it runs that; those with no
 * layout of their own only when `move`.  Not the token embedding (GET_ROWS reads its rows in place); a tied
 * output gets its own copy for the LM head, and GET_ROWS keeps reading token_embd, so only the rows of the
 * tokens seen become resident. */
enum { MATS_PER_LAYER = 13 }; /* the slots array holds n_layer * MATS_PER_LAYER + 1 (the LM head) */

static int cpu_slots(mf_model *m, bool move, const mf_gguf_tensor ***slots) {
    int n = 0;
    for (int il = 0; il < m->hp.n_layer; il++) {
        if (m->layer_backend[il] != MF_BACKEND_ID_CPU) continue; /* another backend's weights: its layout */
        mf_layer_w *L = &m->layers[il];
        const mf_gguf_tensor **f[MATS_PER_LAYER] = {&L->wq,           &L->wk,          &L->wv,
                                                    &L->wo,           &L->ffn_gate,    &L->ffn_up,
                                                    &L->ffn_down,     &L->ffn_gate_exps, &L->ffn_up_exps,
                                                    &L->ffn_down_exps, &L->ffn_gate_shexp, &L->ffn_up_shexp,
                                                    &L->ffn_down_shexp};
        for (int i = 0; i < MATS_PER_LAYER; i++)
            if (*f[i]) slots[n++] = f[i]; /* a dense layer has no expert stacks, a MoE layer no dense FFN */
    }
    if (m->io_backend == MF_BACKEND_ID_CPU) slots[n++] = &m->output; /* else the device's layout */
    /* the CPU owns these weights: its layout for them */
    int k = 0;
    for (int i = 0; i < n; i++) {
        const mf_gguf_tensor *t = *slots[i];
        if (move || mf_backend_weight_layout(MF_BACKEND_CPU, t->type, t->ne[0], t->ne[1]) != t->type)
            slots[k++] = slots[i];
    }
    return k;
}

int mf_model_repack(mf_model *m, int n_threads, mf_error *err) {
    const mf_gguf_tensor ***slots = calloc((size_t)m->hp.n_layer * MATS_PER_LAYER + 1, sizeof *slots);
    if (!slots) return mf_err(err, MF_E_NOMEM, "out of memory");
    const int k = cpu_slots(m, mf_huge_pages_advisable(), slots);
    if (k == 0) {
        free(slots);
        return 0;
    }
    /* the copies, 64-byte aligned in one buffer */
    size_t total = 0;
    for (int i = 0; i < k; i++) total += ((size_t)(*slots[i])->nbytes + 63) / 64 * 64;
    const mf_gguf_tensor **from = calloc((size_t)k, sizeof *from);
    m->copies = calloc((size_t)k, sizeof *m->copies);
    m->repack_buf = mf_huge_alloc(total);
    int rc = 0, n_items = 0;
    repack_item *items = NULL;
    if (!from || !m->copies || !m->repack_buf) {
        rc = mf_err(err, MF_E_NOMEM, "out of memory repacking %d weight matrices (%zu bytes); "
                    "MINFER_REPACK=0 uses them in place", k, total);
        goto out;
    }
    size_t off = 0;
    for (int i = 0; i < k; i++) {
        const mf_gguf_tensor *t = *slots[i];
        mf_gguf_tensor *c = &m->copies[i];
        *c = *t;
        /* an expert stack [K, N, E] is repacked as the N * E rows it is: the layout is asked for one expert's N
         * rows, so a row group never straddles two experts and each expert is its own x8/x16 matrix */
        c->type = mf_backend_weight_layout(MF_BACKEND_CPU, t->type, t->ne[0], t->ne[1]);
        c->data = (char *)m->repack_buf + off;
        from[i] = t;
        off += ((size_t)t->nbytes + 63) / 64 * 64;
    }
    if (!(items = plan_items(from, m->copies, k, &n_items))) {
        rc = mf_err(err, MF_E_NOMEM, "out of memory planning the repack of %d weight matrices", k);
        goto out;
    }
    repack_job job = {.from = from, .to = m->copies, .items = items, .n_items = n_items};
    if ((rc = run_job(&job, n_threads, err))) goto out;
    const int failed = atomic_load(&job.failed);
    if (failed) {
        const mf_gguf_tensor *t = from[failed - 1];
        rc = mf_err(err, MF_E_INTERNAL, "repacking '%.*s' failed", (int)t->name.len, t->name.ptr);
        goto out;
    }
    size_t moved = 0;
    for (int i = 0; i < k; i++) {
        release_pages(from[i]->data, (size_t)from[i]->nbytes); /* the pages items shared at their ends */
        *slots[i] = &m->copies[i];
        if (m->copies[i].type == from[i]->type) {
            m->n_moved++;
            moved += (size_t)from[i]->nbytes;
        } else {
            m->n_repacked++;
            m->repack_bytes += (size_t)from[i]->nbytes;
        }
    }
    m->n_copies = k;
    const double mib = 1024.0 * 1024.0;
    mf_log(MF_LOG_INFO, "repacked %d weight matrices (%.1f MiB) into the x8/x16 layouts and moved %d (%.1f MiB) "
           "into huge pages, on %d threads (MINFER_REPACK=0 to keep them in the file mapping)", m->n_repacked,
           (double)m->repack_bytes / mib, m->n_moved, (double)moved / mib, MF_MAX(1, MF_MIN(n_threads, n_items)));
out:
    free(items);
    free(from);
    free(slots);
    return rc;
}
