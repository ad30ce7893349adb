/* Batches and mf_decode: resolve cells and spans, build-or-reuse the graph (keyed by token count and
 * output rows only), write the inputs and read the logits rows through the scheduler's hooks (each
 * through the backend it lives on; nothing here dereferences a node's memory), run the splits. */
#include "engine/engine_impl.h"

#include "quant/quant.h"

#include <stdlib.h>
#include <string.h>

/* ---------------- batch ---------------- */
int mf_batch_init(mf_batch *b, int32_t capacity, mf_error *err) {
    memset(b, 0, sizeof *b);
    if (capacity <= 0) return mf_err(err, MF_E_INVAL, "batch capacity must be > 0, got %d", capacity);
    b->token = calloc((size_t)capacity, sizeof *b->token);
    b->pos = calloc((size_t)capacity, sizeof *b->pos);
    b->seq_id = calloc((size_t)capacity, sizeof *b->seq_id);
    b->logits = calloc((size_t)capacity, sizeof *b->logits);
    if (!b->token || !b->pos || !b->seq_id || !b->logits) {
        mf_batch_free(b);
        return mf_err(err, MF_E_NOMEM, "out of memory for a batch of %d", capacity);
    }
    b->capacity = capacity;
    return 0;
}

void mf_batch_free(mf_batch *b) {
    if (!b) return;
    free(b->token);
    free(b->pos);
    free(b->seq_id);
    free(b->logits);
    memset(b, 0, sizeof *b);
}

void mf_batch_clear(mf_batch *b) {
    b->n_tokens = 0;
}

int mf_batch_add(mf_batch *b, mf_token token, mf_pos pos, mf_seq_id seq, bool want_logits) {
    if (b->n_tokens >= b->capacity) return MF_E_RANGE;
    int32_t i = b->n_tokens++;
    b->token[i] = token;
    b->pos[i] = pos;
    b->seq_id[i] = seq;
    b->logits[i] = want_logits ? 1 : 0;
    return 0;
}

/* ---------------- decode ---------------- */
/* The graph for nt rows with no output rows and the ids of its inputs and logits (kept with it in the
 * cache, so a reuse costs no search). */
static int get_graph(mf_context *ctx, int32_t nt, int32_t no, mf_graph **out, mf_graph_io *io, mf_error *err) {
    mf_graph_key key = {.n_tokens = nt, .n_outputs = no, .flags = (ctx->embeddings ? 1u : 0u) | (ctx->classifier ? 2u : 0u)};
    mf_graph *g = mf_graph_cache_get(ctx->cache, &key, io);
    if (g) {
        ctx->reuses++;
        *out = g;
        return 0;
    }
    int rc = mf_engine_build_graph(ctx, nt, no, &g, io, err);
    if (rc) return rc;
    /* planned per backend into the context's shared arenas (one per backend for every cached graph) */
    if ((rc = mf_sched_alloc(ctx->sched, g, err))) {
        mf_graph_free(g);
        return mf_err_prefix(err, rc, "allocating the graph for %d tokens", nt);
    }
    size_t peak = mf_graph_peak_bytes(g);
    if (peak > ctx->peak_bytes) ctx->peak_bytes = peak;
    mf_graph_cache_put(ctx->cache, &key, g, io);
    ctx->builds++;
    *out = g;
    return 0;
}

/* First non-finite value of a logits row, or -1.  A float is NaN/Inf exactly when its bits without the
 * sign are >= 0x7f800000, so a max over those bits finds out; the fixed 16-wide inner loop is what gcc
 * -O2 vectorises, so the scan costs a fraction of the LM head that wrote the row.  Only a bad row is
 * searched a second time, for the id. */
static int32_t first_non_finite(const float *row, int32_t n) {
    const uint32_t *u = (const uint32_t *)(const void *)row;
    uint32_t acc[16] = {0}, mx = 0;
    int32_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) {
            uint32_t a = u[i + j] & 0x7fffffffu;
            acc[j] = a > acc[j] ? a : acc[j];
        }
    for (int j = 0; j < 16; j++) mx = acc[j] > mx ? acc[j] : mx;
    for (; i < n; i++) mx = (u[i] & 0x7fffffffu) > mx ? (u[i] & 0x7fffffffu) : mx;
    if (mx < 0x7f800000u) return -1;
    for (i = 0; i < n; i++)
        if ((u[i] & 0x7fffffffu) >= 0x7f800000u) return i;
    return -1;
}

/* One forward over rows [r0, r0 + nt) of the batch; cells are resolved into ctx->cells[r0..]. */
static int decode_chunk(mf_context *ctx, const mf_batch *b, int32_t r0, int32_t nt, int32_t *n_out_done,
                        mf_error *err) {
    const int32_t n_vocab = ctx->out_width; /* n_embd in an embeddings context */
    const char *what = ctx->classifier ? "classifier scores" : ctx->embeddings ? "embeddings" : "logits";
    int32_t no = 0;
    for (int32_t i = 0; i < nt; i++) no += b->logits[r0 + i] != 0;
    /* A chunk nobody wants logits from still has to fill the KV cache: compute its last row and drop it,
     * so the graph never has an empty tensor. */
    const bool fake = no == 0;
    if (fake) no = 1;
    mf_graph *g = NULL;
    mf_graph_io io;
    int rc = get_graph(ctx, nt, no, &g, &io, err);
    if (rc) return rc;
    const int32_t nn = mf_graph_n_nodes(g);
    if (io.tokens < 0 || io.pos < 0 || io.cells < 0 || io.spans < 0 || io.spans >= nn || (no < nt && io.out_ids < 0) ||
        io.logits < 0 || io.logits >= nn)
        return mf_err(err, MF_E_INTERNAL, "graph for %d tokens lacks an input or its logits node", nt);
    rc = mf_kv_prepare(ctx->kv, nt, b->pos + r0, b->seq_id + r0, ctx->cells + r0, true, err);
    if (rc) return rc;
    mf_sched_bind(ctx->sched, g); /* a shared arena may have grown since this graph last ran */
    mf_node *spans = mf_graph_node(g, io.spans);
    spans->data = mf_kv_spans(ctx->kv); /* the buffer moves when it grows */
    spans->bound_bytes = sizeof(int32_t) * (size_t)mf_kv_spans(ctx->kv)[0]; /* with the cell lists */
    /* inputs through the hooks of the backend each lives on (host: a memcpy in place, as before) */
    const size_t row = sizeof(int32_t) * (size_t)nt;
    if (!(rc = mf_sched_write(ctx->sched, g, io.tokens, 0, b->token + r0, row, err)) &&
        !(rc = mf_sched_write(ctx->sched, g, io.pos, 0, b->pos + r0, row, err)) &&
        !(rc = mf_sched_write(ctx->sched, g, io.cells, 0, ctx->cells + r0, row, err)) && no < nt) {
        /* the rows that want logits (few: usually the last one of a prompt) */
        int32_t k = 0;
        for (int32_t i = fake ? nt - 1 : 0; i < nt && !rc; i++)
            if (fake || b->logits[r0 + i])
                rc = mf_sched_write(ctx->sched, g, io.out_ids, sizeof(int32_t) * (size_t)k++, &i, sizeof i, err);
    }
    if (rc) {
        mf_kv_unprepare(ctx->kv, nt, b->seq_id + r0, ctx->cells + r0);
        return rc;
    }
    rc = mf_sched_compute(ctx->sched, g, err);
    if (rc) {
        mf_kv_unprepare(ctx->kv, nt, b->seq_id + r0, ctx->cells + r0);
        return mf_err_prefix(err, rc, "forward over %d tokens", nt);
    }
    if (fake) return 0;
    /* the logits rows straight into the context's buffer, through the output's backend */
    float *logits = ctx->logits + (size_t)*n_out_done * (size_t)n_vocab;
    rc = mf_sched_read(ctx->sched, g, io.logits, 0, logits, sizeof(float) * (size_t)n_vocab * (size_t)no, err);
    if (rc) {
        mf_kv_unprepare(ctx->kv, nt, b->seq_id + r0, ctx->cells + r0);
        return mf_err_prefix(err, rc, "reading the %s of %d tokens", what, nt);
    }
    /* NaN/Inf logits (broken weights, an overflowing activation) would sample garbage and print "nan":
     * refuse the batch instead, naming where it went wrong. */
    for (int32_t i = 0, k = 0; i < nt; i++) {
        if (!b->logits[r0 + i]) continue;
        const float *row = logits + (size_t)k++ * (size_t)n_vocab;
        int32_t bad = first_non_finite(row, n_vocab);
        if (bad < 0) continue;
        mf_kv_unprepare(ctx->kv, nt, b->seq_id + r0, ctx->cells + r0);
        return mf_err(
            err, MF_E_FORMAT,
            "the %s at position %d (sequence %d, batch row %d) are not finite (%s at %s %d): "
            "the model's weights hold NaN/Inf or its activations overflow; check the model file",
            what, b->pos[r0 + i], b->seq_id[r0 + i], r0 + i, row[bad] != row[bad] ? "nan" : "inf",
            ctx->embeddings ? "dimension" : "vocab id", bad);
    }
    for (int32_t i = 0; i < nt; i++)
        if (b->logits[r0 + i]) ctx->out_row[r0 + i] = (*n_out_done)++;
    return 0;
}

int mf_decode(mf_context *ctx, const mf_batch *b, mf_error *err) {
    double t0 = mf_time_now();
    const int32_t n = b->n_tokens, n_vocab = ctx->model->hp.n_vocab, width = ctx->out_width;
    ctx->n_batch_last = 0;
    ctx->last_out = -1;
    if (n <= 0) return mf_err(err, MF_E_INVAL, "empty batch (0 tokens)");
    for (int32_t i = 0; i < n; i++)
        if (b->token[i] < 0 || b->token[i] >= n_vocab)
            return mf_err(err, MF_E_RANGE, "batch row %d holds token id %d, outside the vocabulary [0, %d)",
                          i, b->token[i], n_vocab);
    int32_t free_cells = mf_kv_n_cells(ctx->kv) - mf_kv_n_used(ctx->kv);
    if (n > free_cells)
        return mf_err(
            err, MF_E_RANGE,
            "the context is full: the batch has %d tokens, %d of %d KV cells are free (raise -c/--ctx-size)",
            n, free_cells, ctx->n_ctx);
    int32_t n_out = 0;
    for (int32_t i = 0; i < n; i++) n_out += b->logits[i] != 0;
    if (n > ctx->out_row_cap) {
        int32_t *o = realloc(ctx->out_row, sizeof(int32_t) * (size_t)n);
        int32_t *c = realloc(ctx->cells, sizeof(int32_t) * (size_t)n);
        if (o) ctx->out_row = o;
        if (c) ctx->cells = c;
        if (!o || !c) return mf_err(err, MF_E_NOMEM, "out of memory for a batch of %d", n);
        ctx->out_row_cap = ctx->cells_cap = n;
    }
    size_t need = (size_t)n_out * (size_t)width;
    if (need > ctx->logits_cap) {
        float *l = realloc(ctx->logits, sizeof(float) * need);
        if (!l) return mf_err(err, MF_E_NOMEM, "out of memory for %d output rows", n_out);
        ctx->logits = l;
        ctx->logits_cap = need;
    }
    for (int32_t i = 0; i < n; i++) ctx->out_row[i] = -1;
    int32_t done = 0;
    for (int32_t r0 = 0; r0 < n; r0 += ctx->n_ubatch) {
        int32_t nt = MF_MIN(ctx->n_ubatch, n - r0);
        int rc = decode_chunk(ctx, b, r0, nt, &done, err);
        if (rc) {
            /* a refused batch changes nothing: give back the cells of the chunks already run */
            mf_kv_unprepare(ctx->kv, r0, b->seq_id, ctx->cells);
            for (int32_t i = 0; i < n; i++) ctx->out_row[i] = -1;
            return rc;
        }
    }
    ctx->n_batch_last = n;
    for (int32_t i = n - 1; i >= 0; i--)
        if (ctx->out_row[i] >= 0) {
            ctx->last_out = i;
            break;
        }
    ctx->t_last = mf_time_now() - t0;
    return 0;
}

static const float *out_row(const mf_context *ctx, int32_t i) {
    if (i < 0) i = ctx->last_out;
    if (i < 0 || i >= ctx->n_batch_last || ctx->out_row[i] < 0) return NULL;
    return ctx->logits + (size_t)ctx->out_row[i] * (size_t)ctx->out_width;
}

const float *mf_get_logits(const mf_context *ctx, int32_t i) {
    return ctx->embeddings ? NULL : out_row(ctx, i);
}

const float *mf_get_embeddings(const mf_context *ctx, int32_t i) {
    return ctx->embeddings ? out_row(ctx, i) : NULL;
}
