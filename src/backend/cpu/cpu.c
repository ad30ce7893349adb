/* CPU backend: validates a graph against what the kernels support, sizes the scratch once per forward,
 * then runs every node in order inside ONE threadpool dispatch (a barrier between nodes that compute). */
#include "backend/cpu/cpu_impl.h"

#include "core/env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ALIGN 64

static size_t align_up(size_t x) {
    return (x + ALIGN - 1) & ~(size_t)(ALIGN - 1);
}

int mf_cpu_new(int n_threads, mf_cpu **out, mf_error *err) {
    if (!out) return mf_err(err, MF_E_INVAL, "mf_cpu_new: out is NULL");
    *out = NULL;
    if (n_threads < 1 || n_threads > 1024)
        return mf_err(err, MF_E_INVAL, "CPU thread count %d is out of range 1..1024 (--threads)", n_threads);
    bool profile = false;
    int rc = mf_env_bool("MINFER_PROFILE", &profile, err);
    if (rc) return rc;
    mf_cpu *cpu = calloc(1, sizeof *cpu);
    if (!cpu) return mf_err(err, MF_E_NOMEM, "out of memory creating the CPU backend");
    cpu->n_threads = n_threads;
    mf_cpu_vec_init(&cpu->vec);
    cpu->profile = profile;
    cpu->faults = calloc((size_t)n_threads, sizeof *cpu->faults);
    if (!cpu->faults) {
        free(cpu);
        return mf_err(err, MF_E_NOMEM, "out of memory creating the CPU backend");
    }
    rc = mf_threadpool_new(n_threads, &cpu->tp, err);
    if (rc) {
        free(cpu->faults);
        free(cpu);
        return rc;
    }
    *out = cpu;
    return 0;
}

static void profile_report(const mf_cpu *cpu) {
    int64_t total = 0;
    for (int o = 0; o < MF_OP_COUNT; o++) total += cpu->prof_run_ns[o] + cpu->prof_wait_ns[o];
    if (!total || !cpu->prof_forwards) return;
    fprintf(stderr, "minfer profile (CPU thread 0 of %d, %lld forwards; per forward):\n", cpu->n_threads,
            (long long)cpu->prof_forwards);
    fprintf(stderr, "  whole forward %.3f ms, of which validation + barrier planning %.3f ms\n",
            (double)cpu->prof_total_ns / (double)cpu->prof_forwards / 1e6,
            (double)cpu->prof_setup_ns / (double)cpu->prof_forwards / 1e6);
    fprintf(stderr, "  %-12s %8s %10s %10s %6s\n", "op", "calls", "run ms", "wait ms", "share");
    for (int o = 0; o < MF_OP_COUNT; o++) {
        const int64_t t = cpu->prof_run_ns[o] + cpu->prof_wait_ns[o];
        if (!cpu->prof_calls[o]) continue;
        const double f = (double)cpu->prof_forwards;
        fprintf(stderr, "  %-12s %8.1f %10.3f %10.3f %5.1f%%\n", mf_op_name((mf_op)o), (double)cpu->prof_calls[o] / f,
                (double)cpu->prof_run_ns[o] / f / 1e6, (double)cpu->prof_wait_ns[o] / f / 1e6,
                100.0 * (double)t / (double)total);
    }
}

void mf_cpu_free(mf_cpu *cpu) {
    if (!cpu) return;
    if (cpu->profile) profile_report(cpu);
    mf_threadpool_free(cpu->tp);
    mf_aligned_free(cpu->scratch);
    free(cpu->faults);
    free(cpu->plan);
    free(cpu->fuse);
    free(cpu->readers);
    free(cpu->sole);
    free((void *)cpu->chunks);
    free((void *)cpu->steal);
    free(cpu->ranges);
    free(cpu);
}

int mf_cpu_n_threads(const mf_cpu *cpu) {
    return cpu ? cpu->n_threads : 0;
}

void mf_cpu_run(mf_cpu *cpu, void (*fn)(void *arg, int ith, int nth), void *arg, int nth) {
    mf_threadpool_run(cpu->tp, fn, arg, nth);
}

bool mf_cpu_supports(mf_op op, uint32_t type) {
    const mf_type_info *ti = mf_type_get(type);
    if (!ti) return false;
    /* the x8 layouts exist only as repacked weights (matmul, and row lookups of a tied embedding); other
     * internal types (q8_0s) only inside a matmul */
    if (ti->row_group > 1)
        return op == MF_OP_WEIGHT || op == MF_OP_MATMUL || op == MF_OP_GET_ROWS || op == MF_OP_MATMUL_ID;
    if (ti->internal) return false;
    if (!mf_op_computes(op)) return true; /* leaves and aliases: memory only */
    switch (op) {
    case MF_OP_GET_ROWS:
        return mf_type_dequantizes(type);
    case MF_OP_MATMUL: {
        const mf_quant_kernels *k = mf_quant_kernels_get(type);
        return k && k->vec_dot_tile && k->from_float;
    }
    case MF_OP_RMS_NORM:
    case MF_OP_ADD:
    case MF_OP_MUL:
    case MF_OP_DIV:
    case MF_OP_SCALE:
    case MF_OP_SILU:
    case MF_OP_SWIGLU:
    case MF_OP_SOFTMAX:
    case MF_OP_ROPE:
    case MF_OP_ATTENTION:
    case MF_OP_HADAMARD:
        return type == MF_TYPE_F32;
    case MF_OP_MATMUL_ID: { /* matmul's kernels (the x8/x16 layouts of repacked experts too) */
        const mf_quant_kernels *k = mf_quant_kernels_get(type);
        return k && k->vec_dot_tile && k->from_float;
    }
    case MF_OP_TOPK:
    case MF_OP_MOE_SUM:
        return type == (op == MF_OP_TOPK ? MF_TYPE_I32 : MF_TYPE_F32);
    case MF_OP_KV_STORE:
        return mf_cpu_kv_type_ok(type);
    case MF_OP_CONT:
        return ti->blck_size == 1;
    default:
        return false;
    }
}

static mf_cpu_op_fn op_fn(mf_op op) {
    switch (op) {
    case MF_OP_GET_ROWS:
        return mf_cpu_op_get_rows;
    case MF_OP_RMS_NORM:
        return mf_cpu_op_rms_norm;
    case MF_OP_MATMUL:
        return mf_cpu_op_matmul;
    case MF_OP_ADD:
    case MF_OP_MUL:
    case MF_OP_DIV:
        return mf_cpu_op_binary;
    case MF_OP_SCALE:
    case MF_OP_SILU:
        return mf_cpu_op_unary;
    case MF_OP_SWIGLU:
        return mf_cpu_op_swiglu;
    case MF_OP_SOFTMAX:
        return mf_cpu_op_softmax;
    case MF_OP_ROPE:
        return mf_cpu_op_rope;
    case MF_OP_CONT:
        return mf_cpu_op_cont;
    case MF_OP_KV_STORE:
        return mf_cpu_op_kv_store;
    case MF_OP_ATTENTION:
        return mf_cpu_op_attention;
    case MF_OP_HADAMARD:
        return mf_cpu_op_hadamard;
    case MF_OP_TOPK:
        return mf_cpu_op_topk;
    case MF_OP_MATMUL_ID:
        return mf_cpu_op_matmul_id;
    case MF_OP_MOE_SUM:
        return mf_cpu_op_moe_sum;
    default:
        return NULL; /* leaves and aliases: nothing to compute */
    }
}

static const char *nm(const mf_node *n) {
    return n->name[0] ? n->name : "(unnamed)";
}

static int64_t prof_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* How far into its next decode matmul's weights a thread reads ahead while it waits at barriers (half of
 * the lines: mf_threadpool_barrier_ahead), within L2 (1-2 MiB a core) so they are still there when the
 * matmul starts.  0 turns it off. */
#ifndef MF_CPU_AHEAD_KB
#define MF_CPU_AHEAD_KB 512
#endif

/* the next matmul at or after node i (ex->last: none) */
static int32_t next_matmul(const mf_cpu_exec *ex, int32_t i) {
    while (i < ex->last && (mf_graph_node_c(ex->g, i)->op != MF_OP_MATMUL || (ex->plan[i] & MF_CPU_PLAN_SKIP))) i++;
    return i;
}

/* Every node in order; with MINFER_PROFILE thread 0 also times each op and the barrier wait before it.  At
 * a barrier the thread reads ahead into the weights it streams first in the next decode matmul. */
static void exec_worker(void *ctx, int ith, int nth) {
    const mf_cpu_exec *ex = ctx;
    mf_cpu *cpu = ex->cpu;
    const bool prof = cpu->profile && ith == 0;
    int32_t mm = ex->first - 1; /* the matmul `ahead` is for */
    mf_tp_ahead ahead = {0};
    for (int32_t i = ex->first; i < ex->last; i++) {
        const mf_node *n = mf_graph_node_c(ex->g, i);
        mf_cpu_op_fn fn = op_fn(n->op);
        if (!fn || (ex->plan[i] & MF_CPU_PLAN_SKIP)) continue;
        const int64_t t0 = prof ? prof_now() : 0;
        if (ex->plan[i] & MF_CPU_PLAN_BARRIER) {
            if (MF_CPU_AHEAD_KB > 0 && mm < i) { /* the one it was for has run: on to the next */
                mm = next_matmul(ex, i);
                ahead = mm < ex->last ? mf_cpu_matmul_ahead(ex->g, mf_graph_node_c(ex->g, mm), ith, nth,
                                                            (size_t)MF_CPU_AHEAD_KB << 10)
                                      : (mf_tp_ahead){0};
            }
            mf_threadpool_barrier_ahead(cpu->tp, &ahead);
        }
        const int64_t t1 = prof ? prof_now() : 0;
        fn(ex, n, ith, nth);
        if (prof) {
            cpu->prof_wait_ns[n->op] += t1 - t0;
            cpu->prof_run_ns[n->op] += prof_now() - t1;
            cpu->prof_calls[n->op]++;
        }
    }
    if (prof) cpu->prof_forwards++;
}

/* ---- the barrier plan ----
 * A barrier is needed before node i only if i reads memory written by a node since the last barrier
 * (RAW), or writes memory read or written since then (WAR/WAW: the allocator hands a dead buffer to a
 * later node, and another thread may still be reading it).  Independent neighbours (the q/k/v or
 * gate/up matmuls of one input) run without one.  A converting matmul has its own barrier between
 * converting the activations and the dots, which also closes everything before it.  Consecutive
 * matmuls of the same input and vec_dot type share one conversion. */
typedef struct mf_cpu_range {
    const char *lo, *hi;
    bool write;
} mf_cpu_range;

static const char scratch_tag[1]; /* stands for the shared matmul scratch in the range sets */

static int push_range(mf_cpu *cpu, int32_t *nr, const void *lo, size_t bytes, bool write) {
    if (*nr == cpu->ranges_cap) {
        int32_t nc = cpu->ranges_cap ? cpu->ranges_cap * 2 : 64;
        mf_cpu_range *r = realloc(cpu->ranges, (size_t)nc * sizeof *r);
        if (!r) return MF_E_NOMEM;
        cpu->ranges = r;
        cpu->ranges_cap = nc;
    }
    cpu->ranges[(*nr)++] = (mf_cpu_range){lo, (const char *)lo + bytes, write};
    return 0;
}

/* does [lo, lo+bytes) overlap a range of the current group (only written ones unless any_access) */
static bool hits(const mf_cpu *cpu, int32_t nr, const void *lo, size_t bytes, bool any_access) {
    const char *a = lo, *b = a + bytes;
    for (int32_t k = 0; k < nr; k++)
        if ((any_access || cpu->ranges[k].write) && a < cpu->ranges[k].hi && cpu->ranges[k].lo < b)
            return true;
    return false;
}

static int grow_plan(mf_cpu *cpu, int32_t nn) {
    if (nn <= cpu->plan_cap) return 0;
    uint8_t *p = realloc(cpu->plan, (size_t)nn);
    if (p) cpu->plan = p;
    int32_t *f = realloc(cpu->fuse, (size_t)nn * sizeof *f);
    if (f) cpu->fuse = f;
    int32_t *r = realloc(cpu->readers, (size_t)nn * sizeof *r);
    if (r) cpu->readers = r;
    int32_t *o = realloc(cpu->sole, (size_t)nn * sizeof *o);
    if (o) cpu->sole = o;
    _Atomic int32_t *c = realloc((void *)cpu->chunks, (size_t)nn * sizeof *c);
    if (c) cpu->chunks = c;
    _Atomic uint64_t *st = realloc((void *)cpu->steal, (size_t)nn * (size_t)cpu->n_threads * sizeof *st);
    if (st) cpu->steal = st;
    if (!p || !f || !r || !o || !c || !st) return MF_E_NOMEM;
    cpu->plan_cap = nn;
    return 0;
}

/* Fusion: a MATMUL or RMS_NORM whose only reader is an ADD/MUL computed in place over it (same memory,
 * src0 = this node) whose other operand exists before this node applies that op to its own result and
 * the ADD/MUL is skipped.  Each element gets exactly the same float operations in the same order, so
 * fused and unfused results are bitwise equal; it only saves a pass over memory and a barrier. */
/* is node id's value final before node i runs: computed earlier, or read-only data (a weight, an input
 * the engine wrote before the forward, or an alias of one) that builders create lazily */
static bool ready_before(const mf_graph *g, int32_t id, int32_t i) {
    while (id >= i) {
        const mf_node *n = mf_graph_node_c(g, id);
        if (n->op == MF_OP_WEIGHT || n->op == MF_OP_INPUT) return true;
        if (!mf_op_is_alias(n->op)) return false;
        id = n->src[0];
    }
    return true;
}

static int plan_fusion(mf_cpu *cpu, mf_graph *g, int32_t first, int32_t last) {
    int32_t nn = mf_graph_n_nodes(g), n_fused = 0;
    for (int32_t i = 0; i < nn; i++) cpu->readers[i] = 0, cpu->sole[i] = -1;
    for (int32_t i = 0; i < nn; i++) {
        const mf_node *n = mf_graph_node_c(g, i);
        for (int s = 0; s < MF_MAX_SRC; s++) {
            if (n->src[s] < 0) continue;
            cpu->readers[n->src[s]]++;
            cpu->sole[n->src[s]] = i;
        }
        if (n->view_src >= 0) cpu->readers[n->view_src]++; /* an alias counts as a reader */
    }
    for (int32_t i = first; i < last; i++) {
        const mf_node *n = mf_graph_node_c(g, i);
        if ((n->op != MF_OP_MATMUL && n->op != MF_OP_RMS_NORM) || cpu->readers[i] != 1 ||
            (n->flags & MF_NODE_OUTPUT))
            continue;
        int32_t j = cpu->sole[i];
        if (j >= last) continue; /* the reader runs in another split */
        const mf_node *m = mf_graph_node_c(g, j);
        if ((m->op != MF_OP_ADD && m->op != MF_OP_MUL) || m->src[0] != i || m->src[1] == i ||
            !ready_before(g, m->src[1], i) || m->data != n->data || (cpu->plan[i] & MF_CPU_PLAN_SKIP))
            continue;
        cpu->plan[i] |= MF_CPU_PLAN_FUSED;
        cpu->fuse[i] = j;
        cpu->plan[j] |= MF_CPU_PLAN_SKIP;
        n_fused++;
    }
    return n_fused;
}

static int plan_barriers(mf_cpu *cpu, mf_graph *g, int32_t first, int32_t last) {
    int32_t nn = mf_graph_n_nodes(g);
    if (grow_plan(cpu, nn)) return MF_E_NOMEM;
    memset(cpu->plan, 0, (size_t)nn);
    int n_fused = plan_fusion(cpu, g, first, last);
    int32_t nr = 0, conv_src = -1, n_ops = 0, n_bar = 0, n_reuse = 0, n_priv = 0;
    uint32_t conv_type = 0;
    bool conv_priv = false, conv_packed = false;
    bool at_start = true;
    for (int32_t i = first; i < last; i++) {
        const mf_node *n = mf_graph_node_c(g, i);
        if (!op_fn(n->op) || (cpu->plan[i] & MF_CPU_PLAN_SKIP)) continue;
        bool conv = false, reuse = false, priv = false;
        if (n->op == MF_OP_MATMUL) {
            const mf_node *w = mf_graph_node_c(g, n->src[0]);
            const mf_quant_kernels *k = mf_quant_kernels_get(w->type);
            conv = k->vec_dot_type != MF_TYPE_F32;
            priv = conv && mf_cpu_matmul_private(g, n);
            /* a conversion that did not pack cannot serve a matmul whose kernel reads the packed copy */
            const bool packs = conv && mf_cpu_matmul_packs(g, n);
            reuse = conv && conv_src == n->src[1] && conv_type == (uint32_t)k->vec_dot_type && conv_priv == priv &&
                    (conv_packed || !packs);
            if (conv && !reuse) {
                conv_src = n->src[1];
                conv_type = (uint32_t)k->vec_dot_type;
                conv_priv = priv;
                conv_packed = packs;
            }
            if (priv) cpu->plan[i] |= MF_CPU_PLAN_PRIVATE;
        } else if (n->op == MF_OP_MATMUL_ID) {
            conv = true; /* it converts into the shared scratch, never reusing nor leaving a conversion */
            conv_src = -1;
            conv_priv = false;
        } else if (conv_priv) {
            conv_src = -1; /* keep private reuse to back-to-back matmuls of one input */
        }
        /* a private conversion needs no barrier and touches no shared scratch */
        const bool shared_conv = conv && !priv;
        /* what this node reads: its sources, plus the other operand of a fused ADD/MUL */
        int32_t rd[MF_MAX_SRC + 1];
        int n_rd = 0;
        for (int s = 0; s < MF_MAX_SRC; s++)
            if (n->src[s] >= 0) rd[n_rd++] = n->src[s];
        if (cpu->plan[i] & MF_CPU_PLAN_FUSED) rd[n_rd++] = mf_graph_node_c(g, cpu->fuse[i])->src[1];
        bool barrier = false;
        for (int s = 0; s < n_rd && !barrier; s++) {
            const mf_node *sn = mf_graph_node_c(g, rd[s]);
            if (hits(cpu, nr, sn->data, mf_node_nbytes(sn), false)) barrier = true;
        }
        if (reuse && shared_conv && hits(cpu, nr, scratch_tag, 1, false)) barrier = true;
        if (hits(cpu, nr, n->data, mf_node_nbytes(n), true)) barrier = true;
        if (shared_conv && !reuse && hits(cpu, nr, scratch_tag, 1, true)) barrier = true;
        if (barrier && !at_start) cpu->plan[i] |= MF_CPU_PLAN_BARRIER;
        n_ops++;
        n_bar += (barrier && !at_start) + (shared_conv && !reuse);
        n_reuse += reuse;
        n_priv += priv && !reuse;
        if (barrier || (shared_conv && !reuse)) nr = 0; /* the conversion's own barrier closes the group too */
        if (reuse) cpu->plan[i] |= MF_CPU_PLAN_REUSE;
        at_start = false;
        for (int s = 0; s < n_rd; s++) {
            const mf_node *sn = mf_graph_node_c(g, rd[s]);
            if (push_range(cpu, &nr, sn->data, mf_node_nbytes(sn), false)) return MF_E_NOMEM;
        }
        if (shared_conv && push_range(cpu, &nr, scratch_tag, 1, false)) return MF_E_NOMEM;
        if (push_range(cpu, &nr, n->data, mf_node_nbytes(n), true)) return MF_E_NOMEM;
        /* a write over the converted input invalidates the shared conversion (not expected: the input
         * is live while matmuls read it) */
        if (conv_src >= 0 && !(n->op == MF_OP_MATMUL && n->src[1] == conv_src)) {
            const mf_node *cs = mf_graph_node_c(g, conv_src);
            const char *a = cs->data, *b = a + mf_node_nbytes(cs), *lo = n->data,
                       *hi = lo + mf_node_nbytes(n);
            if (lo < b && a < hi) conv_src = -1;
        }
    }
    if (mf_log_get_level() >= MF_LOG_DEBUG)
        mf_log(MF_LOG_DEBUG,
               "cpu plan: %d ops (%d fused away), %d barriers, %d shared matmul conversions, %d per-thread "
               "conversions",
               n_ops, n_fused, n_bar, n_reuse, n_priv);
    return 0;
}

int mf_cpu_compute(mf_cpu *cpu, mf_graph *g, mf_error *err) {
    return mf_cpu_compute_range(cpu, g, 0, mf_graph_n_nodes(g), err);
}

int mf_cpu_compute_range(mf_cpu *cpu, mf_graph *g, int32_t first, int32_t last, mf_error *err) {
    if (!cpu || !g) return mf_err(err, MF_E_INVAL, "mf_cpu_compute: %s is NULL", cpu ? "graph" : "backend");
    const int64_t t_enter = cpu->profile ? prof_now() : 0;
    int rc = mf_graph_error(g, err);
    if (rc) return rc;
    int32_t nn = mf_graph_n_nodes(g);
    if (first < 0 || last > nn || first > last)
        return mf_err(err, MF_E_RANGE, "CPU node range [%d, %d) is outside the graph's %d nodes", first, last,
                      nn);
    size_t shared = 0, per_thread = 0, conv = 0;
    for (int32_t i = first; i < last; i++) {
        mf_node *n = mf_graph_node(g, i);
        if (n->view_src >= 0) {
            const mf_node *r = mf_graph_node_c(g, n->view_src);
            if (!r->data)
                return mf_err(err, MF_E_INVAL, "%s '%s' (node %d) aliases '%s' which has no memory (%s)",
                              mf_op_name(n->op), nm(n), i, nm(r),
                              r->op == MF_OP_INPUT ? "bind the input" : "call mf_graph_alloc first");
            n->data = (char *)r->data + n->view_offs;
        } else if (!n->data) {
            return mf_err(err, MF_E_INVAL, "%s '%s' (node %d) has no memory (%s)", mf_op_name(n->op), nm(n),
                          i,
                          n->op == MF_OP_INPUT    ? "bind the input before the forward"
                          : n->op == MF_OP_WEIGHT ? "the weight was never loaded"
                                                  : "call mf_graph_alloc first");
        }
        for (int s = 0; s < MF_MAX_SRC; s++) {
            const mf_node *sn = n->src[s] >= 0 ? mf_graph_node_c(g, n->src[s]) : NULL;
            if (sn && !sn->data)
                return mf_err(err, MF_E_INVAL,
                              "%s '%s' (node %d) reads '%s' (node %d), which has no memory here",
                              mf_op_name(n->op), nm(n), i, nm(sn), n->src[s]);
        }
        uint32_t t = n->type;
        if (mf_op_typed_by_src0(n->op)) t = mf_graph_node_c(g, n->src[0])->type;
        if (!mf_cpu_supports(n->op, t))
            return mf_err(err, MF_E_UNSUPPORTED,
                          "the CPU backend cannot run %s '%s' (node %d) with %s %s; requantize the model or "
                          "run this op on another backend",
                          mf_op_name(n->op), nm(n), i,
                          mf_op_typed_by_src0(n->op) ? "weight type" : "type",
                          mf_type_name(t));
        switch (n->op) {
        case MF_OP_MATMUL:
            shared = MF_MAX(shared, mf_cpu_matmul_shared_bytes(g, n));
            conv = MF_MAX(conv, mf_cpu_matmul_private_bytes(g, n));
            break;
        case MF_OP_MATMUL_ID:
            shared = MF_MAX(shared, mf_cpu_matmul_id_shared_bytes(g, n));
            per_thread = MF_MAX(per_thread, mf_cpu_matmul_id_thread_bytes(g, n));
            break;
        case MF_OP_ROPE:
            per_thread = MF_MAX(per_thread, mf_cpu_rope_thread_bytes(n));
            break;
        case MF_OP_ATTENTION:
            for (int s = 1; s <= 2; s++) {
                const mf_node *c = mf_graph_node_c(g, n->src[s]);
                if (!mf_cpu_kv_type_ok(c->type))
                    return mf_err(
                        err, MF_E_UNSUPPORTED,
                        "the CPU backend cannot run attention '%s' (node %d) over a %s cache of type %s "
                        "(supported: f32, f16, bf16, q8_0; see --cache-type)",
                        nm(n), i, s == 1 ? "K" : "V", mf_type_name(c->type));
            }
            per_thread = MF_MAX(per_thread, mf_cpu_attention_thread_bytes(g, n));
            break;
        default:
            break;
        }
    }
    shared = align_up(shared);
    per_thread = align_up(per_thread);
    conv = align_up(conv);
    size_t need = shared + (per_thread + conv) * (size_t)cpu->n_threads;
    if (need > cpu->scratch_size) {
        mf_aligned_free(cpu->scratch);
        cpu->scratch = mf_aligned_alloc(ALIGN, need);
        cpu->scratch_size = cpu->scratch ? need : 0;
        if (!cpu->scratch)
            return mf_err(err, MF_E_NOMEM, "cannot allocate %zu bytes of CPU scratch for this graph", need);
    }
    if (plan_barriers(cpu, g, first, last))
        return mf_err(err, MF_E_NOMEM, "out of memory planning the barriers of a %d-node graph", nn);
    for (int i = 0; i < cpu->n_threads; i++) cpu->faults[i].node = -1;
    for (int32_t i = first; i < last; i++) {
        atomic_store_explicit(&cpu->chunks[i], 0, memory_order_relaxed);
        for (int t = 0; t < cpu->n_threads; t++)
            atomic_store_explicit(&cpu->steal[(size_t)i * (size_t)cpu->n_threads + (size_t)t], 0, memory_order_relaxed);
    }
    mf_cpu_exec ex = {.cpu = cpu,
                      .g = g,
                      .shared = cpu->scratch,
                      .per_thread = cpu->scratch + shared,
                      .per_thread_size = per_thread,
                      .plan = cpu->plan,
                      .fuse = cpu->fuse,
                      .first = first,
                      .last = last,
                      .chunks = cpu->chunks,
                      .steal = cpu->steal,
                      .conv = cpu->scratch + shared + per_thread * (size_t)cpu->n_threads,
                      .conv_size = conv};
    const int64_t t_run = cpu->profile ? prof_now() : 0;
    mf_threadpool_run(cpu->tp, exec_worker, &ex, cpu->n_threads);
    if (cpu->profile) {
        cpu->prof_setup_ns += t_run - t_enter;
        cpu->prof_total_ns += prof_now() - t_enter;
    }

    const mf_cpu_fault *worst = NULL;
    for (int i = 0; i < cpu->n_threads; i++)
        if (cpu->faults[i].node >= 0 &&
            (!worst || cpu->faults[i].node < worst->node ||
             (cpu->faults[i].node == worst->node && cpu->faults[i].index < worst->index)))
            worst = &cpu->faults[i];
    if (worst) {
        const mf_node *n = mf_graph_node_c(g, worst->node);
        return mf_err(err, MF_E_RANGE, "%s '%s' (node %d): %s %lld at index %lld is outside 0..%lld",
                      mf_op_name(n->op), nm(n), worst->node, worst->what, (long long)worst->value,
                      (long long)worst->index, (long long)worst->limit - 1);
    }
    return 0;
}
