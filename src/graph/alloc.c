/* graph allocator: liveness over creation order, best-fit reuse inside one 64-byte aligned arena,
 * in-place reuse for elementwise/row-wise ops whose input dies there.
 *
 * A "buffer" is the memory of a root node (a node that is not a view).  Views (VIEW/RESHAPE/PERMUTE/
 * KV_STORE) alias their root, so every reader of a view keeps the root alive.  A node computed in
 * place inherits its source's buffer (directly or through a reshape of it), and the buffer then lives
 * until the inheritor's last reader. */
#include "graph/graph_internal.h"

#include <stdlib.h>
#include <string.h>

#define ALIGN 64
#define NO_OFFS UINT64_MAX

static uint64_t align_up(uint64_t x) {
    return (x + ALIGN - 1) & ~(uint64_t)(ALIGN - 1);
}

typedef struct {
    uint64_t offs, size;
} block;

typedef struct {
    block *b;
    int n, cap;
    uint64_t end; /* high-water mark of the arena */
} freelist;

static int fl_insert(freelist *fl, uint64_t offs, uint64_t size) {
    /* keep blocks sorted by offset and merge neighbours */
    int i = 0;
    while (i < fl->n && fl->b[i].offs < offs) i++;
    bool merge_prev = i > 0 && fl->b[i - 1].offs + fl->b[i - 1].size == offs;
    bool merge_next = i < fl->n && offs + size == fl->b[i].offs;
    if (merge_prev && merge_next) {
        fl->b[i - 1].size += size + fl->b[i].size;
        memmove(&fl->b[i], &fl->b[i + 1], (size_t)(fl->n - i - 1) * sizeof(block));
        fl->n--;
    } else if (merge_prev) {
        fl->b[i - 1].size += size;
    } else if (merge_next) {
        fl->b[i].offs = offs;
        fl->b[i].size += size;
    } else {
        if (fl->n == fl->cap) {
            int nc = fl->cap ? fl->cap * 2 : 64;
            block *nb = realloc(fl->b, (size_t)nc * sizeof *nb);
            if (!nb) return MF_E_NOMEM;
            fl->b = nb;
            fl->cap = nc;
        }
        memmove(&fl->b[i + 1], &fl->b[i], (size_t)(fl->n - i) * sizeof(block));
        fl->b[i] = (block){offs, size};
        fl->n++;
    }
    return 0;
}

static uint64_t fl_take(freelist *fl, uint64_t size) {
    int best = -1;
    for (int i = 0; i < fl->n; i++)
        if (fl->b[i].size >= size && (best < 0 || fl->b[i].size < fl->b[best].size)) best = i;
    if (best >= 0) {
        uint64_t o = fl->b[best].offs;
        fl->b[best].offs += size;
        fl->b[best].size -= size;
        if (fl->b[best].size == 0) {
            memmove(&fl->b[best], &fl->b[best + 1], (size_t)(fl->n - best - 1) * sizeof(block));
            fl->n--;
        }
        return o;
    }
    /* grow the arena; a free block touching the end is extended rather than left stranded */
    if (fl->n > 0 && fl->b[fl->n - 1].offs + fl->b[fl->n - 1].size == fl->end) {
        uint64_t o = fl->b[fl->n - 1].offs;
        fl->end = o + size;
        fl->n--;
        return o;
    }
    uint64_t o = fl->end;
    fl->end += size;
    return o;
}

static bool is_alias(const mf_node *n) {
    return n->view_src >= 0;
}

static bool needs_arena(const mf_node *n) {
    return !is_alias(n) && n->op != MF_OP_WEIGHT && n->op != MF_OP_EXTERNAL;
}

/* ops that may write their result over src0 (each output element depends only on the same element
 * or on the same row of src0, and the kernels read a row before writing it) */
static bool inplace_op(mf_op op) {
    switch (op) {
    case MF_OP_ADD:
    case MF_OP_MUL:
    case MF_OP_DIV:
    case MF_OP_SCALE:
    case MF_OP_SILU:
    case MF_OP_SWIGLU:
    case MF_OP_RMS_NORM:
    case MF_OP_SOFTMAX:
    case MF_OP_ROPE:
        return true;
    default:
        return false;
    }
}

#define KEEP INT32_MAX /* last reader of a buffer that lives to the end (outputs, inputs) */

/* gives node i its memory: in place over src0 when that is safe, else a best-fit block; queues the
 * buffer's release after i's last reader */
static int slot_of(const mf_node *n) {
    return n->backend >= 0 && n->backend < MF_GRAPH_ARENAS ? n->backend : 0;
}

static void place(mf_graph *g, freelist *fls, int32_t i, const int32_t *last, int32_t *owner, int32_t *holder,
                  int32_t *head, int32_t *next) {
    mf_node *nd = &g->nodes[i];
    freelist *fl = &fls[slot_of(nd)];
    uint64_t size = align_up(mf_node_nbytes(nd));
    int32_t s0 = nd->src[0];
    bool inplace = false;
    if (inplace_op(nd->op) && s0 >= 0) { /* an output may take over a dying source: it is then kept */
        /* a reshape is its root's bytes in the same order (Qwen2's heads view of q and k before RoPE):
         * taking the root over keeps the ropes of q and k from reusing each other's freed buffer, which
         * made the second rope wait at a barrier for the first to finish reading */
        if (g->nodes[s0].op == MF_OP_RESHAPE && g->nodes[s0].view_offs == 0) s0 = g->nodes[s0].view_src;
        const mf_node *sn = &g->nodes[s0];
        /* src0 must be a root buffer dying right here, of the same size and layout */
        inplace = !is_alias(sn) && needs_arena(sn) && sn->op != MF_OP_INPUT && last[s0] == i &&
                  g->offs[s0] != NO_OFFS && slot_of(sn) == slot_of(nd) && sn->type == nd->type &&
                  mf_node_is_contiguous(sn) &&
                  mf_node_nbytes(sn) == mf_node_nbytes(nd);
        for (int s = 1; inplace && s < MF_MAX_SRC; s++) {
            int32_t sid = nd->src[s];
            if (sid < 0 || sid == nd->src[0]) continue;
            int32_t sr = is_alias(&g->nodes[sid]) ? g->nodes[sid].view_src : sid;
            if (sr == s0) inplace = false; /* another view of the same memory: layouts may differ */
        }
    }
    if (inplace) {
        g->offs[i] = g->offs[s0];
        owner[i] = owner[s0];
    } else {
        g->offs[i] = fl_take(fl, size);
    }
    holder[owner[i]] = i;
    if (last[i] != KEEP) {
        next[i] = head[last[i]];
        head[last[i]] = i;
    }
}

int mf_graph_plan_memory(mf_graph *g, size_t need[MF_GRAPH_ARENAS], mf_error *err) {
    if (!g) return mf_err(err, MF_E_INVAL, "mf_graph_plan_memory: graph is NULL");
    if (g->has_err) return mf_graph_error(g, err);
    int32_t n = g->n_nodes;
    g->planned = false;
    for (int b = 0; b < MF_GRAPH_ARENAS; b++) g->bound[b] = NULL, g->need[b] = 0;
    free(g->offs);
    g->offs = calloc((size_t)(n ? n : 1), sizeof *g->offs);
    int32_t *last = malloc((size_t)(n ? n : 1) * sizeof *last);   /* last reader of each root */
    int32_t *owner = malloc((size_t)(n ? n : 1) * sizeof *owner); /* node whose buffer a root uses */
    int32_t *head = malloc((size_t)(n + 1) * sizeof *head);       /* frees due after step i: linked lists */
    int32_t *next = malloc((size_t)(n ? n : 1) * sizeof *next);
    int32_t *holder = malloc((size_t)(n ? n : 1) * sizeof *holder); /* per buffer: node holding it now */
    freelist fl[MF_GRAPH_ARENAS];
    memset(fl, 0, sizeof fl);
    int rc = 0;
    if (!g->offs || !last || !owner || !head || !next || !holder) {
        rc = mf_err(err, MF_E_NOMEM, "out of memory planning a graph of %d nodes", n);
        goto done;
    }
    for (int32_t i = 0; i < n; i++) {
        g->offs[i] = NO_OFFS;
        last[i] = i;
        owner[i] = i;
        holder[i] = -1;
    }
    for (int32_t i = 0; i < n; i++) {
        const mf_node *nd = &g->nodes[i];
        int32_t r = is_alias(nd) ? nd->view_src : i;
        if (nd->flags & MF_NODE_OUTPUT) last[r] = KEEP;
        if (is_alias(nd) && last[r] != KEEP && last[r] < i) last[r] = i;
        for (int s = 0; s < MF_MAX_SRC; s++) {
            int32_t sid = nd->src[s];
            if (sid < 0) continue;
            int32_t sr = is_alias(&g->nodes[sid]) ? g->nodes[sid].view_src : sid;
            if (last[sr] != KEEP && last[sr] < i) last[sr] = i;
        }
    }
    for (int32_t i = 0; i < n; i++) {
        const mf_node *nd = &g->nodes[i];
        if (nd->op == MF_OP_INPUT) last[i] = KEEP; /* the engine writes inputs before the forward */
    }
    for (int32_t i = 0; i <= n; i++) head[i] = -1;

    for (int32_t i = 0; i < n; i++) {
        if (needs_arena(&g->nodes[i])) place(g, fl, i, last, owner, holder, head, next);
        /* release buffers whose current holder's last reader is this node (a view or a store may be the
         * last reader); a buffer handed on in place has a newer holder and is skipped here */
        for (int32_t j = head[i]; j >= 0; j = next[j]) {
            int32_t b = owner[j];
            if (holder[b] != j) continue;
            holder[b] = -1;
            if (fl_insert(&fl[slot_of(&g->nodes[b])], g->offs[j], align_up(mf_node_nbytes(&g->nodes[b])))) {
                rc = mf_err(err, MF_E_NOMEM, "out of memory in the graph allocator's free list");
                goto done;
            }
        }
        head[i] = -1;
    }
    /* nodes with no reader at all (and not outputs) were freed right after they were computed */
    for (int b = 0; b < MF_GRAPH_ARENAS; b++) g->need[b] = (size_t)fl[b].end;
    g->planned = true;
    if (need)
        for (int b = 0; b < MF_GRAPH_ARENAS; b++) need[b] = g->need[b];
done:
    free(last);
    free(owner);
    free(head);
    free(next);
    free(holder);
    for (int b = 0; b < MF_GRAPH_ARENAS; b++) free(fl[b].b);
    return rc;
}

void mf_graph_bind_memory(mf_graph *g, void *const bases[MF_GRAPH_ARENAS]) {
    if (!g || !g->planned) return;
    int32_t n = g->n_nodes;
    for (int b = 0; b < MF_GRAPH_ARENAS; b++) g->bound[b] = g->need[b] ? bases[b] : NULL;
    for (int32_t i = 0; i < n; i++) {
        mf_node *nd = &g->nodes[i];
        if (g->offs[i] != NO_OFFS) nd->data = (char *)bases[slot_of(nd)] + g->offs[i];
    }
    for (int32_t i = 0; i < n; i++) {
        mf_node *nd = &g->nodes[i];
        if (is_alias(nd)) {
            const mf_node *r = &g->nodes[nd->view_src];
            nd->data = r->data ? (char *)r->data + nd->view_offs : NULL;
        }
    }
}

bool mf_graph_bound_to(const mf_graph *g, void *const bases[MF_GRAPH_ARENAS]) {
    if (!g || !g->planned) return false;
    for (int b = 0; b < MF_GRAPH_ARENAS; b++)
        if (g->need[b] && g->bound[b] != bases[b]) return false;
    return true;
}

int mf_graph_alloc(mf_graph *g, mf_error *err) {
    size_t need[MF_GRAPH_ARENAS];
    int rc = mf_graph_plan_memory(g, need, err);
    if (rc) return rc;
    void *bases[MF_GRAPH_ARENAS] = {0};
    for (int b = 0; b < MF_GRAPH_ARENAS; b++) {
        mf_aligned_free(g->own[b]);
        g->own[b] = NULL;
        if (!need[b]) continue;
        g->own[b] = mf_aligned_alloc(ALIGN, need[b]);
        if (!g->own[b])
            return mf_err(err, MF_E_NOMEM, "cannot allocate the %zu-byte compute arena for a graph of %d nodes",
                          need[b], g->n_nodes);
        bases[b] = g->own[b];
    }
    mf_graph_bind_memory(g, bases);
    return 0;
}

size_t mf_graph_peak_bytes(const mf_graph *g) {
    size_t t = 0;
    if (g)
        for (int b = 0; b < MF_GRAPH_ARENAS; b++) t += g->need[b];
    return t;
}
