/* sched: assignment, splits and the two-phase staging copies (see sched.h for the contract). */
#include "backend/sched.h"
#include "core/env.h"

#include "quant/quant.h"

#include <stdlib.h>
#include <string.h>

static const char *nm(const mf_node *n) { return n->name[0] ? n->name : "(unnamed)"; }

uint32_t mf_node_support_type(const mf_graph *g, const mf_node *n) {
    if (mf_op_typed_by_src0(n->op) && n->src[0] >= 0)
        return mf_graph_node_c(g, n->src[0])->type;
    return n->type;
}

static bool executes(const mf_node *n);

/* ---- assignment ---- */

static void allowed_names(const mf_backend *order, int n, char *buf, size_t cap) {
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", mf_backend_name(order[i]));
}

int mf_sched_assign(mf_graph *g, const mf_backend_filter *fence, mf_error *err) {
    int rc = mf_graph_error(g, err);
    if (rc) return rc;
    if (!fence) fence = mf_backend_fence();
    mf_backend order[MF_BACKEND_SLOTS];
    int n_order = mf_backend_by_priority(fence->allowed, order);
    const mf_backend_entry *entries[MF_BACKEND_SLOTS];
    for (int k = 0; k < n_order; k++) entries[k] = mf_backend_entry_get(order[k]);
    int32_t nn = mf_graph_n_nodes(g);
    for (int32_t i = 0; i < nn; i++) {
        mf_node *n = mf_graph_node(g, i);
        int32_t root = n->view_src >= 0 ? n->view_src : (mf_op_is_alias(n->op) ? n->src[0] : -1);
        if (root >= 0) {
            /* an alias lives where the memory it aliases lives */
            const mf_node *r = mf_graph_node_c(g, root);
            n->backend = r->backend;
            if (!mf_op_is_alias(n->op)) {
                mf_backend b = {(uint16_t)r->backend};
                const mf_backend_entry *e = mf_backend_entry_get(b);
                uint32_t t = mf_node_support_type(g, n);
                if (!e || !e->supports || !e->supports(n->op, t))
                    return mf_err(err, MF_E_UNSUPPORTED,
                                  "node '%s' (#%d, %s, type %s) writes into '%s', which lives on %s, and %s cannot "
                                  "run %s on %s; see docs/SUPPORT-MATRIX.md",
                                  nm(n), i, mf_op_name(n->op), mf_type_name(t), nm(r), mf_backend_name(b),
                                  mf_backend_name(b), mf_op_name(n->op), mf_type_name(t));
            }
            continue;
        }
        uint32_t t = mf_node_support_type(g, n);
        int k = 0;
        while (k < n_order && !(entries[k]->supports && entries[k]->supports(n->op, t))) k++;
        if (k == n_order) {
            char names[128];
            allowed_names(order, n_order, names, sizeof names);
            bool wt = mf_op_typed_by_src0(n->op);
            return mf_err(err, MF_E_UNSUPPORTED,
                          "no allowed backend can run node '%s' (#%d, %s, %s %s); allowed backends: %s (see "
                          "docs/SUPPORT-MATRIX.md; --backend / MINFER_BACKENDS may have fenced one that can)",
                          nm(n), i, mf_op_name(n->op), wt ? "weight type" : "type", mf_type_name(t), names);
        }
        n->backend = order[k].id;
    }
    return 0;
}

int mf_sched_assign_placed(mf_graph *g, const mf_placement *p, const mf_backend_filter *fence, mf_error *err) {
    int rc = mf_graph_error(g, err);
    if (rc) return rc;
    if (!fence) fence = mf_backend_fence();
    for (int32_t l = -1; l < p->n_layer; l++) {
        mf_backend b = l < 0 ? p->io : (mf_backend){p->layer[l]};
        char what[48];
        if (l < 0)
            snprintf(what, sizeof what, "the embeddings/output");
        else
            snprintf(what, sizeof what, "layer %d", l);
        if (!mf_backend_entry_get(b))
            return mf_err(err, MF_E_BACKEND, "the placement puts %s on backend id %d, which is not in this build", what,
                          (int)b.id);
        if (!fence->allowed[b.id])
            return mf_err(err, MF_E_BACKEND,
                          "the placement puts %s on %s, which --backend / MINFER_BACKENDS does not allow; allow it or "
                          "place %s elsewhere",
                          what, mf_backend_name(b), what);
    }
    int32_t nn = mf_graph_n_nodes(g);
    for (int32_t i = 0; i < nn; i++) {
        mf_node *n = mf_graph_node(g, i);
        int32_t root = n->view_src >= 0 ? n->view_src : (mf_op_is_alias(n->op) ? n->src[0] : -1);
        mf_backend b;
        if (root >= 0) {
            b = (mf_backend){(uint16_t)mf_graph_node_c(g, root)->backend};
            if (mf_op_is_alias(n->op)) {
                n->backend = b.id;
                continue;
            }
        } else if (n->layer >= p->n_layer) {
            return mf_err(err, MF_E_INVAL, "node '%s' (#%d) is tagged layer %d, the placement has %d layers", nm(n), i,
                          n->layer, p->n_layer);
        } else if (n->op == MF_OP_EXTERNAL && n->layer < 0) {
            /* memory the host owns outside any block (the KV store's spans buffer, written by its cell
             * bookkeeping): it lives on the CPU wherever the embeddings/output run; a device reads a
             * staged copy */
            b = MF_BACKEND_CPU;
        } else {
            b = n->layer >= 0 ? (mf_backend){p->layer[n->layer]} : p->io;
        }
        n->backend = b.id;
        if (!executes(n)) continue;
        const mf_backend_entry *e = mf_backend_entry_get(b);
        uint32_t t = mf_node_support_type(g, n);
        if (!e->supports || !e->supports(n->op, t)) {
            bool wt = mf_op_typed_by_src0(n->op);
            return mf_err(err, MF_E_UNSUPPORTED,
                          "node '%s' (#%d, %s, %s %s) of %s%d is placed on %s, which cannot run it (see "
                          "docs/SUPPORT-MATRIX.md); place %s on another backend",
                          nm(n), i, mf_op_name(n->op), wt ? "weight type" : "type", mf_type_name(t),
                          n->layer >= 0 ? "layer " : "the embeddings/output, layer ", n->layer, e->name,
                          n->layer >= 0 ? "that layer" : "the embeddings/output");
        }
    }
    return 0;
}

/* ---- the scheduler context ---- */

typedef struct {
    int32_t node;
    mf_backend dst;
    void *buf;
    size_t nbytes, cap; /* bytes this copy moves; bytes buf holds */
    bool copied;  /* phase A done this forward */
    bool pending; /* phase A done, phase B not yet */
    bool issued;  /* phase A was an async transfer (phase B calls the source's await_cross) */
    void *ticket;
} staging;

struct mf_sched {
    mf_backend_opts opts;
    void *pool[MF_BACKEND_SLOTS];
    bool owned[MF_BACKEND_SLOTS];
    bool sync_copies;
    mf_sched_stats stats;

    /* the plan */
    mf_graph *g;
    int32_t n_nodes;
    uint64_t plan_hash;
    mf_split *splits;
    int32_t n_splits;
    int32_t *inputs; /* node ids, per split from split->input0 */
    int32_t n_inputs;
    staging *st;
    int32_t n_st;
    int32_t *st_of; /* [node * MF_BACKEND_SLOTS + dst] -> staging index or -1 */

    /* one compute arena per backend, shared by every graph this context runs (worst case of them) */
    void *arena[MF_BACKEND_SLOTS];
    size_t arena_size[MF_BACKEND_SLOTS];

    /* swaps active during the current split */
    int32_t *swapped;
    void **saved;
    int32_t n_swapped;
};

int mf_sched_new(const mf_backend_opts *opts, mf_sched **out, mf_error *err) {
    bool sync_copies = false;
    int rc = mf_env_flag("MINFER_SYNC_COPIES", &sync_copies, err);
    if (rc) return rc;
    mf_sched *s = calloc(1, sizeof *s);
    if (!s) return mf_err(err, MF_E_NOMEM, "cannot allocate a scheduler context (%zu bytes)", sizeof *s);
    if (opts) s->opts = *opts;
    s->sync_copies = sync_copies;
    *out = s;
    return 0;
}

static void plan_free(mf_sched *s) {
    for (int32_t i = 0; i < s->n_st; i++) mf_backend_free(s->st[i].dst, s->st[i].buf);
    free(s->st);
    free(s->st_of);
    free(s->splits);
    free(s->inputs);
    free(s->swapped);
    free(s->saved);
    s->st = NULL, s->st_of = NULL, s->splits = NULL, s->inputs = NULL, s->swapped = NULL, s->saved = NULL;
    s->n_st = s->n_splits = s->n_inputs = s->n_swapped = 0;
    s->g = NULL;
    s->n_nodes = 0;
}

void mf_sched_invalidate(mf_sched *s) {
    if (s) plan_free(s);
}

void mf_sched_free(mf_sched *s) {
    if (!s) return;
    mf_sched_drain(s, NULL);
    plan_free(s);
    for (int id = 0; id < MF_BACKEND_SLOTS; id++) mf_backend_free((mf_backend){(uint16_t)id}, s->arena[id]);
    for (int id = 0; id < MF_BACKEND_SLOTS; id++) {
        if (!s->pool[id] || !s->owned[id]) continue;
        const mf_backend_entry *e = mf_backend_entry_get((mf_backend){(uint16_t)id});
        if (e && e->release) e->release(s->pool[id]);
    }
    free(s);
}

int mf_sched_set_pool(mf_sched *s, mf_backend b, void *pool, mf_error *err) {
    if (b.id >= MF_BACKEND_SLOTS || !mf_backend_entry_get(b))
        return mf_err(err, MF_E_INVAL, "cannot hand a pool to backend '%s': it is not in this build", mf_backend_name(b));
    if (s->pool[b.id])
        return mf_err(err, MF_E_INVAL, "backend '%s' already has a pool in this scheduler", mf_backend_name(b));
    s->pool[b.id] = pool;
    s->owned[b.id] = false;
    return 0;
}

int mf_sched_pool(mf_sched *s, mf_backend b, void **pool, mf_error *err) {
    const mf_backend_entry *e = b.id < MF_BACKEND_SLOTS ? mf_backend_entry_get(b) : NULL;
    if (!e) return mf_err(err, MF_E_BACKEND, "backend '%s' is not in this build", mf_backend_name(b));
    if (!s->pool[b.id]) {
        if (!e->enable) return mf_err(err, MF_E_BACKEND, "backend '%s' cannot be enabled (no enable hook)", e->name);
        void *p = NULL;
        int rc = e->enable(&s->opts, &p, err);
        if (rc) return mf_err_prefix(err, rc, "enabling backend '%s'", e->name);
        s->pool[b.id] = p;
        s->owned[b.id] = true;
    }
    *pool = s->pool[b.id];
    return 0;
}

void mf_sched_set_sync_copies(mf_sched *s, bool on) { s->sync_copies = on; }

mf_sched_stats mf_sched_get_stats(const mf_sched *s) { return s->stats; }
void mf_sched_reset_stats(mf_sched *s) { memset(&s->stats, 0, sizeof s->stats); }

int32_t mf_sched_n_splits(const mf_sched *s) { return s->n_splits; }
const mf_split *mf_sched_get_split(const mf_sched *s, int32_t i) {
    return i >= 0 && i < s->n_splits ? &s->splits[i] : NULL;
}
int32_t mf_sched_split_input(const mf_sched *s, const mf_split *sp, int32_t k) {
    return k >= 0 && k < sp->n_inputs ? s->inputs[sp->input0 + k] : -1;
}

/* ---- planning ---- */

/* What a plan depends on: per node its backend, op, sources and size.  A different graph that happens to
 * reuse a freed graph's address therefore never inherits its plan (or its staging sizes). */
static uint64_t plan_hash(const mf_graph *g) {
    uint64_t h = 1469598103934665603ull;
    int32_t nn = mf_graph_n_nodes(g);
#define MIX(v) (h = (h ^ (uint64_t)(v)) * 1099511628211ull)
    for (int32_t i = 0; i < nn; i++) {
        const mf_node *n = mf_graph_node_c(g, i);
        MIX((uint32_t)n->backend);
        MIX((uint32_t)n->op);
        for (int k = 0; k < MF_MAX_SRC; k++) MIX((uint32_t)n->src[k]);
        MIX(mf_node_nbytes(n));
    }
#undef MIX
    return h;
}

static bool executes(const mf_node *n) { return mf_op_computes(n->op); }

int mf_sched_plan(mf_sched *s, mf_graph *g, mf_error *err) {
    int rc = mf_graph_error(g, err);
    if (rc) return rc;
    int32_t nn = mf_graph_n_nodes(g);
    uint64_t h = plan_hash(g);
    if (s->g == g && s->n_nodes == nn && s->plan_hash == h && s->splits) return 0;
    mf_sched_drain(s, NULL);
    plan_free(s);
    if (nn == 0) return mf_err(err, MF_E_INVAL, "cannot schedule an empty graph");
    for (int32_t i = 0; i < nn; i++) {
        const mf_node *n = mf_graph_node_c(g, i);
        mf_backend b = {(uint16_t)(n->backend < 0 ? 0 : n->backend)};
        if (n->backend < 0 || n->backend >= MF_BACKEND_SLOTS || !mf_backend_entry_get(b))
            return mf_err(err, MF_E_INVAL, "node '%s' (#%d, %s) has no usable backend (%d); run mf_sched_assign first",
                          nm(n), i, mf_op_name(n->op), n->backend);
    }
    int32_t n_splits = 1;
    for (int32_t i = 1; i < nn; i++)
        if (mf_graph_node_c(g, i)->backend != mf_graph_node_c(g, i - 1)->backend) n_splits++;
    s->splits = calloc((size_t)n_splits, sizeof *s->splits);
    s->st_of = malloc((size_t)nn * MF_BACKEND_SLOTS * sizeof *s->st_of);
    s->inputs = malloc(((size_t)nn * MF_MAX_SRC + 1) * sizeof *s->inputs);
    s->st = calloc((size_t)nn * MF_MAX_SRC + 1, sizeof *s->st);
    s->swapped = malloc(((size_t)nn * MF_MAX_SRC + 1) * sizeof *s->swapped);
    s->saved = malloc(((size_t)nn * MF_MAX_SRC + 1) * sizeof *s->saved);
    if (!s->splits || !s->st_of || !s->inputs || !s->st || !s->swapped || !s->saved) {
        plan_free(s);
        return mf_err(err, MF_E_NOMEM, "out of memory planning the splits of a %d-node graph", nn);
    }
    for (size_t k = 0; k < (size_t)nn * MF_BACKEND_SLOTS; k++) s->st_of[k] = -1;
    int32_t sp = -1;
    for (int32_t i = 0; i < nn; i++) {
        const mf_node *n = mf_graph_node_c(g, i);
        if (i == 0 || n->backend != mf_graph_node_c(g, i - 1)->backend) {
            sp++;
            s->splits[sp] = (mf_split){.backend = {(uint16_t)n->backend}, .first = i, .last = i + 1,
                                       .n_inputs = 0, .input0 = s->n_inputs};
        } else {
            s->splits[sp].last = i + 1;
        }
        if (!executes(n)) continue;
        mf_split *cur = &s->splits[sp];
        for (int k = 0; k < MF_MAX_SRC; k++) {
            int32_t src = n->src[k];
            if (src < 0) continue;
            const mf_node *sn = mf_graph_node_c(g, src);
            if (sn->backend == n->backend) continue;
            size_t key = (size_t)src * MF_BACKEND_SLOTS + (size_t)n->backend;
            int32_t e = s->st_of[key];
            if (e < 0) {
                size_t bytes = mf_node_nbytes(sn);
                e = s->n_st++;
                s->st_of[key] = e;
                s->st[e] = (staging){.node = src, .dst = {(uint16_t)n->backend}, .nbytes = bytes, .cap = bytes};
                /* the staging buffer is the destination's memory: its compute reads it in place */
                rc = mf_backend_alloc(s->st[e].dst, bytes ? bytes : 64, &s->st[e].buf, err);
                if (rc) {
                    s->st[e].buf = NULL;
                    plan_free(s);
                    return mf_err_prefix(err, rc, "staging '%s' for %s", nm(sn), mf_backend_name(s->st[e].dst));
                }
            }
            /* record once per split */
            bool seen = false;
            for (int32_t q = cur->input0; q < cur->input0 + cur->n_inputs; q++)
                if (s->inputs[q] == src) seen = true;
            if (!seen) {
                s->inputs[s->n_inputs++] = src;
                cur->n_inputs++;
            }
        }
    }
    s->n_splits = n_splits;
    s->g = g;
    s->n_nodes = nn;
    s->plan_hash = h;
    return 0;
}

/* ---- the staging protocol ---- */

static staging *find_st(const mf_sched *s, int32_t node, mf_backend dst) {
    if (!s->g || node < 0 || node >= s->n_nodes || dst.id >= MF_BACKEND_SLOTS) return NULL;
    int32_t e = s->st_of[(size_t)node * MF_BACKEND_SLOTS + dst.id];
    return e >= 0 ? &s->st[e] : NULL;
}

static int no_entry(const mf_sched *s, int32_t node, mf_backend dst, mf_error *err) {
    const mf_node *n = s->g && node >= 0 && node < s->n_nodes ? mf_graph_node_c(s->g, node) : NULL;
    return mf_err(err, MF_E_INVAL, "node %s (#%d) is not staged for %s in the current plan (no split on %s reads it)",
                  n ? nm(n) : "?", node, mf_backend_name(dst), mf_backend_name(dst));
}

int mf_sched_copy_across(mf_sched *s, mf_graph *g, int32_t node, mf_backend dst, mf_error *err) {
    if (g != s->g) return mf_err(err, MF_E_INVAL, "mf_sched_copy_across: the graph is not the planned one");
    staging *st = find_st(s, node, dst);
    if (!st) return no_entry(s, node, dst, err);
    if (st->pending) return 0; /* the same transfer is already in flight: not a second copy */
    const mf_node *n = mf_graph_node_c(g, node);
    /* an EXTERNAL holding more than its shape (the KV spans) moves all of it: grow the staging buffer */
    const size_t bytes = n->bound_bytes > mf_node_nbytes(n) ? n->bound_bytes : mf_node_nbytes(n);
    if (bytes > st->cap) {
        /* grows by half again at least: the spans grow by a few bytes every decode step, and a staging
         * buffer that moves every step would also defeat a device's captured replay of the step */
        const size_t cap = MF_MAX(bytes, st->cap + st->cap / 2);
        void *nb = NULL;
        int grc = mf_backend_alloc(dst, cap, &nb, err);
        if (grc) return mf_err_prefix(err, grc, "staging '%s' (%zu bytes) for %s", nm(n), cap, mf_backend_name(dst));
        mf_backend_free(dst, st->buf);
        st->buf = nb;
        st->cap = cap;
    }
    st->nbytes = bytes;
    mf_backend src = {(uint16_t)n->backend};
    if (mf_backend_eq(src, dst)) return 0;
    if (!n->data)
        return mf_err(err, MF_E_INVAL, "cannot stage '%s' (#%d, %s) for %s: it has no memory (INPUT not bound?)", nm(n),
                      node, mf_op_name(n->op), mf_backend_name(dst));
    const mf_backend_entry *e = mf_backend_entry_get(src);
    void *pool = NULL;
    int rc = mf_sched_pool(s, src, &pool, err);
    if (rc) return rc;
    bool issued = false;
    void *ticket = NULL;
    if (!s->sync_copies && e->copy_cross) {
        rc = e->copy_cross(pool, n, st->buf, st->nbytes, dst, &ticket, &issued, err);
        if (rc) return mf_err_prefix(err, rc, "staging '%s' from %s to %s", nm(n), e->name, mf_backend_name(dst));
    }
    if (!issued) {
        /* declined (or sync mode): the blocking host round trip */
        if (!e->host_read)
            return mf_err(err, MF_E_BACKEND, "backend '%s' can neither copy '%s' to %s nor read it to the host", e->name,
                          nm(n), mf_backend_name(dst));
        if (mf_backend_is_host(dst)) {
            rc = e->host_read(pool, n, 0, st->buf, st->nbytes, err);
        } else { /* through a host bounce into the destination's memory */
            void *tmp = malloc(st->nbytes ? st->nbytes : 1);
            rc = tmp ? e->host_read(pool, n, 0, tmp, st->nbytes, err)
                     : mf_err(err, MF_E_NOMEM, "no %zu-byte host buffer to stage '%s'", st->nbytes, nm(n));
            if (!rc) rc = mf_backend_write(dst, st->buf, tmp, st->nbytes, err);
            free(tmp);
        }
        if (rc) return mf_err_prefix(err, rc, "staging '%s' from %s to %s (blocking)", nm(n), e->name, mf_backend_name(dst));
        s->stats.blocking_copies++;
    }
    st->issued = issued;
    st->ticket = ticket;
    st->pending = true;
    st->copied = true;
    s->stats.copies++;
    return 0;
}

int mf_sched_await_cross(mf_sched *s, int32_t node, mf_backend dst, mf_error *err) {
    staging *st = find_st(s, node, dst);
    if (!st) return no_entry(s, node, dst, err);
    if (!st->pending)
        return mf_err(err, MF_E_INVAL, "await for '%s' -> %s without a pending copy (one wait per copy)",
                      nm(mf_graph_node_c(s->g, node)), mf_backend_name(dst));
    if (st->issued) {
        mf_backend src = {(uint16_t)mf_graph_node_c(s->g, node)->backend};
        const mf_backend_entry *e = mf_backend_entry_get(src);
        int rc = e->await_cross ? e->await_cross(s->pool[src.id], st->ticket, err)
                                : mf_err(err, MF_E_BACKEND, "backend '%s' issued a copy it cannot await", e->name);
        st->pending = false; /* the ticket is spent either way */
        st->ticket = NULL;
        s->stats.waits++;
        if (rc) return mf_err_prefix(err, rc, "waiting for '%s' -> %s", nm(mf_graph_node_c(s->g, node)), mf_backend_name(dst));
        return 0;
    }
    st->pending = false;
    s->stats.waits++;
    return 0;
}

int mf_sched_cross_input(const mf_sched *s, int32_t node, mf_backend dst, void **data, mf_error *err) {
    const staging *st = find_st(s, node, dst);
    if (!st) return no_entry(s, node, dst, err);
    const mf_node *n = mf_graph_node_c(s->g, node);
    if (st->pending)
        return mf_err(err, MF_E_BACKEND,
                      "staged value '%s' (#%d) for %s is still in flight: its copy was enqueued but not awaited "
                      "(missing mf_sched_await_cross); refusing to read it",
                      nm(n), node, mf_backend_name(dst));
    if (!st->copied)
        return mf_err(err, MF_E_BACKEND, "staged value '%s' (#%d) for %s was never copied this forward", nm(n), node,
                      mf_backend_name(dst));
    *data = st->buf;
    return 0;
}

int mf_sched_cross_input_ready(mf_sched *s, int32_t node, mf_backend dst, void **data, mf_error *err) {
    staging *st = find_st(s, node, dst);
    if (!st) return no_entry(s, node, dst, err);
    if (st->pending) {
        int rc = mf_sched_await_cross(s, node, dst, err);
        if (rc) return rc;
    }
    return mf_sched_cross_input(s, node, dst, data, err);
}

int mf_sched_drain(mf_sched *s, mf_error *err) {
    int first = 0;
    for (int32_t i = 0; i < s->n_st; i++) {
        if (!s->st[i].pending) continue;
        int rc = mf_sched_await_cross(s, s->st[i].node, s->st[i].dst, err);
        s->stats.drained++;
        if (rc && !first) first = rc;
    }
    return first;
}

/* ---- execution ---- */

static void restore_swaps(mf_sched *s, mf_graph *g) {
    for (int32_t k = s->n_swapped - 1; k >= 0; k--) mf_graph_node(g, s->swapped[k])->data = s->saved[k];
    s->n_swapped = 0;
}

static int swap_in(mf_sched *s, mf_graph *g, int32_t node, mf_backend dst, mf_error *err) {
    for (int32_t k = 0; k < s->n_swapped; k++)
        if (s->swapped[k] == node) return 0;
    void *data = NULL;
    int rc = mf_sched_cross_input_ready(s, node, dst, &data, err);
    if (rc) return rc;
    mf_node *n = mf_graph_node(g, node);
    s->swapped[s->n_swapped] = node;
    s->saved[s->n_swapped] = n->data;
    s->n_swapped++;
    n->data = data;
    return 0;
}

static int run_split(mf_sched *s, mf_graph *g, const mf_split *sp, mf_error *err) {
    const mf_backend_entry *e = mf_backend_entry_get(sp->backend);
    void *pool = NULL;
    int rc = mf_sched_pool(s, sp->backend, &pool, err);
    if (rc) return rc;
    /* phase A for every input of this boundary before any wait */
    for (int32_t k = 0; k < sp->n_inputs; k++) {
        int32_t node = s->inputs[sp->input0 + k];
        staging *st = find_st(s, node, sp->backend);
        if (st->copied) continue; /* staged by an earlier split on the same backend this forward */
        rc = mf_sched_copy_across(s, g, node, sp->backend, err);
        if (rc) return rc;
    }
    /* run the nodes; before a node's first read of a staged value, wait for it (and flush the nodes
     * before it so the backend never reads a value ahead of its wait) */
    int32_t run0 = sp->first;
    for (int32_t i = sp->first; i < sp->last; i++) {
        const mf_node *n = mf_graph_node_c(g, i);
        if (!executes(n)) continue;
        for (int k = 0; k < MF_MAX_SRC; k++) {
            int32_t src = n->src[k];
            if (src < 0 || mf_graph_node_c(g, src)->backend == n->backend) continue;
            bool already = false;
            for (int32_t q = 0; q < s->n_swapped; q++)
                if (s->swapped[q] == src) already = true;
            if (already) continue;
            staging *st = find_st(s, src, sp->backend);
            if (st && st->pending && run0 < i) {
                rc = e->compute(pool, g, run0, i, err);
                if (rc) return rc;
                run0 = i;
            }
            rc = swap_in(s, g, src, sp->backend, err);
            if (rc) return rc;
        }
    }
    if (run0 < sp->last) {
        rc = e->compute(pool, g, run0, sp->last, err);
        if (rc) return rc;
    }
    if (e->synchronize) {
        rc = e->synchronize(pool, err);
        if (rc) return mf_err_prefix(err, rc, "retiring backend '%s'", e->name);
    }
    return 0;
}

int mf_sched_compute(mf_sched *s, mf_graph *g, mf_error *err) {
    int rc = mf_sched_plan(s, g, err);
    if (rc) return rc;
    for (int32_t i = 0; i < s->n_st; i++) s->st[i].copied = false;
    for (int32_t i = 0; i < s->n_splits && !rc; i++) {
        rc = run_split(s, g, &s->splits[i], err);
        restore_swaps(s, g);
    }
    /* a value nothing read is awaited once here; on a failure, in-flight copies are still retired */
    int drc = mf_sched_drain(s, rc ? NULL : err);
    return rc ? rc : drc;
}

/* ---- memory ---- */

_Static_assert(MF_GRAPH_ARENAS == MF_BACKEND_SLOTS, "one graph arena per backend slot");

int mf_sched_alloc(mf_sched *s, mf_graph *g, mf_error *err) {
    size_t need[MF_GRAPH_ARENAS];
    int rc = mf_graph_plan_memory(g, need, err);
    if (rc) return rc;
    for (int id = 0; id < MF_BACKEND_SLOTS; id++) {
        if (need[id] <= s->arena_size[id]) continue;
        mf_backend b = {(uint16_t)id};
        /* grow: graphs bound to the old arena are rebound by mf_sched_bind before their next forward */
        mf_backend_free(b, s->arena[id]);
        s->arena[id] = NULL;
        s->arena_size[id] = 0;
        rc = mf_backend_alloc(b, need[id], &s->arena[id], err);
        if (rc) {
            s->arena[id] = NULL;
            return mf_err_prefix(err, rc, "the compute arena of %s (%zu bytes for a %d-node graph)",
                                 mf_backend_name(b), need[id], mf_graph_n_nodes(g));
        }
        s->arena_size[id] = need[id];
    }
    mf_graph_bind_memory(g, s->arena);
    return 0;
}

void mf_sched_bind(mf_sched *s, mf_graph *g) {
    if (!mf_graph_bound_to(g, s->arena)) mf_graph_bind_memory(g, s->arena);
}

size_t mf_sched_arena_bytes(const mf_sched *s, mf_backend b) {
    return b.id < MF_BACKEND_SLOTS ? s->arena_size[b.id] : 0;
}

/* ---- inputs and outputs ---- */

static int io_entry(mf_sched *s, const mf_graph *g, int32_t node, const mf_backend_entry **e, void **pool,
                    mf_error *err) {
    if (node < 0 || node >= mf_graph_n_nodes(g))
        return mf_err(err, MF_E_INVAL, "node id %d is outside the graph's %d nodes", node, mf_graph_n_nodes(g));
    const mf_node *n = mf_graph_node_c(g, node);
    mf_backend b = {(uint16_t)(n->backend < 0 ? MF_BACKEND_ID_CPU : n->backend)};
    *e = mf_backend_entry_get(b);
    if (!*e) return mf_err(err, MF_E_INVAL, "node '%s' (#%d) has no usable backend (%d)", nm(n), node, n->backend);
    if (!n->data)
        return mf_err(err, MF_E_INVAL, "node '%s' (#%d) has no memory (allocate the graph first)", nm(n), node);
    if (!(*e)->host_read || !(*e)->host_write)
        return mf_err(err, MF_E_BACKEND, "backend '%s' cannot move '%s' to or from the host", (*e)->name, nm(n));
    return mf_sched_pool(s, b, pool, err);
}

int mf_sched_write(mf_sched *s, mf_graph *g, int32_t node, size_t offs, const void *src, size_t n, mf_error *err) {
    const mf_backend_entry *e = NULL;
    void *pool = NULL;
    int rc = io_entry(s, g, node, &e, &pool, err);
    if (rc) return rc;
    mf_node *nd = mf_graph_node(g, node);
    if (offs > mf_node_nbytes(nd) || n > mf_node_nbytes(nd) - offs)
        return mf_err(err, MF_E_RANGE, "writing %zu bytes at %zu into '%s' (#%d), which has %zu", n, offs, nm(nd), node,
                      mf_node_nbytes(nd));
    return e->host_write(pool, nd, offs, src, n, err);
}

int mf_sched_read(mf_sched *s, mf_graph *g, int32_t node, size_t offs, void *dst, size_t n, mf_error *err) {
    const mf_backend_entry *e = NULL;
    void *pool = NULL;
    int rc = io_entry(s, g, node, &e, &pool, err);
    if (rc) return rc;
    const mf_node *nd = mf_graph_node_c(g, node);
    if (offs > mf_node_nbytes(nd) || n > mf_node_nbytes(nd) - offs)
        return mf_err(err, MF_E_RANGE, "reading %zu bytes at %zu from '%s' (#%d), which has %zu", n, offs, nm(nd), node,
                      mf_node_nbytes(nd));
    return e->host_read(pool, nd, offs, dst, n, err);
}
