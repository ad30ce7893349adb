// The CUDA runtime (make CUDA=1): the services ops.h promises the launchers (scratch, the error checks,
// the shared-memory opt-in), the pool each scheduler context enables (device, non-blocking stream, cuBLAS
// handle on it), the node loop over a split's range, and CUDA graphs of the decode step.
//
// CUDA graphs.  A decode step is a few hundred short kernels whose launch cost (a few microseconds each)
// is as large as their run time; a captured graph replays them in one launch.  A range is captured once per
// key - the graph, the range, and every address and shape its nodes and their sources use (arena, staging
// buffers, KV regions, weights, scratch) - and replayed while the key is unchanged; anything that changes
// one of them (another cached graph, an arena or a staging buffer that moved, scratch that grew) gives
// another key and a new capture.  A few keys are kept (least recently used goes), so a server alternating
// between two batch shapes does not capture every step.  Only ranges whose token count is small are
// captured, as llama.cpp does (it captures single-token decode only): a prefill's kernels run long enough
// that launch cost is noise, and every new prompt length would be a capture used once.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/ops.h"
#include "backend/cuda/cuda.h"

/* Largest token count (rows of the range's matmuls, queries of its attention) still captured: decode,
 * speculative verification of a short draft, a handful of server slots decoding together. */
#define MF_CUDA_GRAPH_MAX_TOKENS 8
#define MF_CUDA_GRAPH_SLOTS 8
#define MF_CUDA_EVENTS 8

static const char *nname(const mf_node *n) { return !n ? "(no node)" : n->name[0] ? n->name : "(unnamed)"; }

/* ---- the error rules ---- */

extern "C" int mf_cuda_pre_launch(const char *kernel, const mf_node *n, mf_error *err) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return 0;
    return mf_err(err, MF_E_BACKEND,
                  "an earlier CUDA call left error %s (%d: %s); found before launching %s for node '%s' (%s), which "
                  "did not cause it; CUDA_LAUNCH_BLOCKING=1 makes the failing call report itself",
                  cudaGetErrorName(e), (int)e, cudaGetErrorString(e), kernel, nname(n), n ? mf_op_name(n->op) : "-");
}

extern "C" int mf_cuda_launch_check(const char *kernel, const mf_node *n, mf_error *err) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return 0;
    return mf_err(err, MF_E_BACKEND, "launching CUDA kernel %s for node '%s' (%s) failed: %s (%d: %s)", kernel, nname(n),
                  n ? mf_op_name(n->op) : "-", cudaGetErrorName(e), (int)e, cudaGetErrorString(e));
}

extern "C" int mf_cuda_call_check(int cuda_error, const char *call, const char *kernel, const mf_node *n, mf_error *err) {
    if (cuda_error == 0) return 0;
    cudaError_t e = (cudaError_t)cuda_error;
    (void)cudaGetLastError(); /* reported here; not left for the next launch to find */
    return mf_err(err, MF_E_BACKEND, "%s failed (for %s of node '%s', %s): %s (%d: %s)", call, kernel, nname(n),
                  n ? mf_op_name(n->op) : "-", cudaGetErrorName(e), (int)e, cudaGetErrorString(e));
}

/* ---- dynamic shared memory: opted into once per kernel (process-wide: function attributes are) ---- */

static pthread_mutex_t g_smem_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    const void *func;
    size_t bytes;
} g_smem[128];
static int g_n_smem;

static size_t smem_limit(void) {
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return (size_t)v;
}

extern "C" int mf_cuda_smem_optin(const void *func, const char *kernel, size_t bytes, const mf_node *n, mf_error *err) {
    if (bytes <= 48 * 1024) return 0; /* the default every kernel has */
    pthread_mutex_lock(&g_smem_mu);
    int k = 0;
    while (k < g_n_smem && g_smem[k].func != func) k++;
    if (k < g_n_smem && g_smem[k].bytes >= bytes) {
        pthread_mutex_unlock(&g_smem_mu);
        return 0;
    }
    const size_t limit = smem_limit();
    int rc = 0;
    if (limit && bytes > limit) {
        rc = mf_err(err, MF_E_UNSUPPORTED,
                    "CUDA kernel %s for node '%s' needs %zu bytes of dynamic shared memory per block, and this device "
                    "allows at most %zu (cudaDevAttrMaxSharedMemoryPerBlockOptin); run that layer on the CPU "
                    "(fewer --gpu-layers)",
                    kernel, nname(n), bytes, limit);
    } else {
        cudaError_t e = cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            rc = mf_err(err, MF_E_BACKEND,
                        "cudaFuncSetAttribute(MaxDynamicSharedMemorySize = %zu) refused for CUDA kernel %s (node '%s'): "
                        "%s (%d: %s); the device's opt-in limit is %zu bytes",
                        bytes, kernel, nname(n), cudaGetErrorName(e), (int)e, cudaGetErrorString(e), limit);
        } else if (k < g_n_smem) {
            g_smem[k].bytes = bytes;
        } else if (g_n_smem < (int)(sizeof g_smem / sizeof g_smem[0])) {
            g_smem[g_n_smem].func = func;
            g_smem[g_n_smem].bytes = bytes;
            g_n_smem++;
        } /* table full: the attribute is set again next time, which is harmless */
    }
    pthread_mutex_unlock(&g_smem_mu);
    return rc;
}

/* ---- the pool ---- */

typedef struct {
    uint64_t key;
    cudaGraphExec_t exec;
    uint64_t used; /* LRU tick; 0 = empty */
} graph_slot;

struct mf_cuda_pool {
    mf_cuda_ctx c;
    bool graphs;
    graph_slot slot[MF_CUDA_GRAPH_SLOTS];
    uint64_t tick;
    uint64_t warm[MF_CUDA_GRAPH_SLOTS]; /* keys run once uncaptured (the warm-up before a capture) */
    int warm_next;
    cudaEvent_t ev[MF_CUDA_EVENTS];
    int ev_next;
    /* the last range enqueued, named when an asynchronous failure surfaces at a synchronization (copied:
     * the graph may be gone by then) */
    int32_t last_first, last_last;
    char last_names[160];
    uint64_t captures, replays, uncaptured;
};

static cudaStream_t stream_of(const mf_cuda_pool *p) { return (cudaStream_t)p->c.stream; }

static int api(cudaError_t e, const char *call, mf_error *err) {
    if (e == cudaSuccess) return 0;
    (void)cudaGetLastError();
    return mf_err(err, MF_E_BACKEND, "%s failed: %s (%d: %s)", call, cudaGetErrorName(e), (int)e, cudaGetErrorString(e));
}

extern "C" int mf_cuda_pool_new(bool graphs, mf_cuda_pool **out, mf_error *err) {
    *out = NULL;
    /* an error some earlier call left (a sticky fault of another context) is named, not inherited silently */
    cudaError_t prior = cudaGetLastError();
    if (prior != cudaSuccess)
        return mf_err(err, MF_E_BACKEND, "an earlier CUDA call left error %s (%d: %s) before this CUDA pool was created",
                      cudaGetErrorName(prior), (int)prior, cudaGetErrorString(prior));
    mf_cuda_pool *p = (mf_cuda_pool *)calloc(1, sizeof *p);
    if (!p) return mf_err(err, MF_E_NOMEM, "out of memory for a CUDA pool (%zu bytes)", sizeof *p);
    mf_cuda_ctx *c = &p->c;
    p->graphs = graphs;
    int v = 0, rc = 0;
    cudaStream_t s = NULL;
    if ((rc = api(cudaGetDevice(&c->device), "cudaGetDevice", err)) ||
        (rc = api(cudaSetDevice(c->device), "cudaSetDevice", err)) ||
        (rc = api(cudaDeviceGetAttribute(&c->sm_count, cudaDevAttrMultiProcessorCount, c->device),
                  "cudaDeviceGetAttribute(MultiProcessorCount)", err)) ||
        (rc = api(cudaDeviceGetAttribute(&c->cc_major, cudaDevAttrComputeCapabilityMajor, c->device),
                  "cudaDeviceGetAttribute(ComputeCapabilityMajor)", err)) ||
        (rc = api(cudaDeviceGetAttribute(&c->cc_minor, cudaDevAttrComputeCapabilityMinor, c->device),
                  "cudaDeviceGetAttribute(ComputeCapabilityMinor)", err)) ||
        (rc = api(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, c->device),
                  "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)", err)) ||
        (rc = api(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags(NonBlocking)", err))) {
        free(p);
        return rc;
    }
    c->smem_optin = (size_t)v;
    c->stream = s;
    /* cuBLAS is optional: a launcher that uses it finds c->cublas NULL and says so; creating it costs a
     * little device memory once per pool */
    cublasHandle_t h = NULL;
    if (cublasCreate(&h) == CUBLAS_STATUS_SUCCESS) {
        if (cublasSetStream(h, s) == CUBLAS_STATUS_SUCCESS) c->cublas = h;
        else (void)cublasDestroy(h);
    }
    if (!c->cublas) mf_log(MF_LOG_WARN, "CUDA: no cuBLAS handle (cublasCreate failed); kernels that need it will refuse");
    /* the matmul kernels' lookup tables, here because no graph is being captured yet */
    if ((rc = mf_cuda_matmul_init(c->stream, err))) {
        mf_cuda_pool_free(p);
        return rc;
    }
    mf_log(MF_LOG_INFO, "CUDA: device %d, compute capability %d.%d, %d SMs, %zu bytes of opt-in shared memory per block, "
           "CUDA graphs %s", c->device, c->cc_major, c->cc_minor, c->sm_count, c->smem_optin,
           graphs ? "on (MINFER_CUDA_GRAPHS=0 turns them off)" : "off (MINFER_CUDA_GRAPHS=0)");
    *out = p;
    return 0;
}

static void drop_graphs(mf_cuda_pool *p) {
    for (int i = 0; i < MF_CUDA_GRAPH_SLOTS; i++) {
        if (p->slot[i].used) (void)cudaGraphExecDestroy(p->slot[i].exec);
        p->slot[i].used = 0;
    }
}

extern "C" void mf_cuda_pool_free(mf_cuda_pool *p) {
    if (!p) return;
    if (p->c.stream) (void)cudaStreamSynchronize(stream_of(p));
    drop_graphs(p);
    for (int i = 0; i < MF_CUDA_EVENTS; i++)
        if (p->ev[i]) (void)cudaEventDestroy(p->ev[i]);
    if (p->c.cublas) (void)cublasDestroy((cublasHandle_t)p->c.cublas);
    if (p->c.scratch) (void)cudaFree(p->c.scratch);
    if (p->c.stream) (void)cudaStreamDestroy(stream_of(p));
    (void)cudaGetLastError();
    mf_log(MF_LOG_DEBUG, "CUDA pool: %llu graph captures, %llu replays, %llu ranges run uncaptured",
           (unsigned long long)p->captures, (unsigned long long)p->replays, (unsigned long long)p->uncaptured);
    free(p);
}

extern "C" void mf_cuda_pool_graph_stats(const mf_cuda_pool *p, uint64_t *captures, uint64_t *replays,
                                         uint64_t *uncaptured) {
    *captures = p->captures;
    *replays = p->replays;
    *uncaptured = p->uncaptured;
}

/* ---- scratch ---- */

extern "C" int mf_cuda_scratch(mf_cuda_ctx *c, size_t bytes, void **out, mf_error *err) {
    *out = NULL;
    if (c->scratch && bytes <= c->scratch_bytes) {
        *out = c->scratch;
        return 0;
    }
    if (bytes > c->scratch_want) c->scratch_want = bytes;
    if (c->capturing)
        return mf_err(err, MF_E_BACKEND,
                      "%zu bytes of CUDA scratch asked for during a graph capture (%zu held); the step is captured "
                      "again after scratch grows", bytes, c->scratch_bytes);
    /* kernels enqueued earlier may still read the old scratch: retire them before it goes */
    int rc = api(cudaStreamSynchronize((cudaStream_t)c->stream), "cudaStreamSynchronize (before growing scratch)", err);
    if (rc) return rc;
    if (c->scratch) (void)cudaFree(c->scratch);
    c->scratch = NULL;
    c->scratch_bytes = 0;
    const size_t mib = (size_t)1 << 20;
    const size_t want = c->scratch_want > bytes ? c->scratch_want : bytes;
    const size_t size = (want + mib - 1) / mib * mib; /* whole MiB: fewer regrowths */
    cudaError_t e = cudaMalloc(&c->scratch, size);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        c->scratch = NULL;
        return mf_err(err, MF_E_NOMEM,
                      "cudaMalloc of %zu bytes of CUDA scratch failed: %s (%d: %s); fewer --gpu-layers, or a smaller "
                      "batch (-ub), needs less",
                      size, cudaGetErrorName(e), (int)e, cudaGetErrorString(e));
    }
    c->scratch_bytes = size;
    *out = c->scratch;
    return 0;
}

/* ---- the node loop ---- */

static int run_node(mf_cuda_ctx *c, const mf_node *n, mf_error *err) {
    switch (n->op) { /* exhaustive, so a new op without a launcher is a compile warning */
    case MF_OP_INPUT:
    case MF_OP_WEIGHT:
    case MF_OP_EXTERNAL:
    case MF_OP_VIEW:
    case MF_OP_RESHAPE:
    case MF_OP_PERMUTE: return 0; /* !mf_op_computes: memory, nothing to run */
    case MF_OP_GET_ROWS: return mf_cuda_op_get_rows(c, n, err);
    case MF_OP_MATMUL: return mf_cuda_op_matmul(c, n, err);
    case MF_OP_RMS_NORM: return mf_cuda_op_rms_norm(c, n, err);
    case MF_OP_ADD:
    case MF_OP_MUL: return mf_cuda_op_binary(c, n, err);
    case MF_OP_SCALE: return mf_cuda_op_scale(c, n, err);
    case MF_OP_SILU: return mf_cuda_op_silu(c, n, err);
    case MF_OP_SWIGLU: return mf_cuda_op_swiglu(c, n, err);
    case MF_OP_SOFTMAX: return mf_cuda_op_softmax(c, n, err);
    case MF_OP_ROPE: return mf_cuda_op_rope(c, n, err);
    case MF_OP_KV_STORE: return mf_cuda_op_kv_store(c, n, err);
    case MF_OP_ATTENTION: return mf_cuda_op_attention(c, n, err);
    case MF_OP_CONT: return mf_cuda_op_cont(c, n, err);
    case MF_OP_HADAMARD: return mf_cuda_op_hadamard(c, n, err);
    case MF_OP_TOPK: /* not claimed (support.c): the scheduler never assigns these here */
    case MF_OP_MATMUL_ID:
    case MF_OP_MOE_SUM:
    case MF_OP_DIV:
    case MF_OP_COUNT: break;
    }
    return mf_err(err, MF_E_INTERNAL, "node '%s' (op %d) has no CUDA launcher", nname(n), (int)n->op);
}

static int run_range(mf_cuda_pool *p, const mf_graph *g, int32_t first, int32_t last, mf_error *err) {
    for (int32_t i = first; i < last; i++) {
        int rc = run_node(&p->c, mf_graph_node_c(g, i), err);
        if (rc) return rc;
    }
    return 0;
}

/* The range's token count: rows of its matmuls, queries of its attention, rows it embeds or stores. */
static int64_t range_tokens(const mf_graph *g, int32_t first, int32_t last) {
    int64_t t = 0;
    for (int32_t i = first; i < last; i++) {
        const mf_node *n = mf_graph_node_c(g, i);
        int64_t k = 0;
        if (n->op == MF_OP_MATMUL) {
            const mf_node *x = mf_graph_node_c(g, n->src[1]);
            k = x->ne[1] * x->ne[2] * x->ne[3];
        } else if (n->op == MF_OP_ATTENTION) {
            k = mf_graph_node_c(g, n->src[0])->ne[2];
        } else if (n->op == MF_OP_GET_ROWS) {
            k = n->ne[1];
        } else if (n->op == MF_OP_KV_STORE) { /* the node views the whole cache: its rows are src1's */
            k = mf_graph_node_c(g, n->src[1])->ne[1];
        }
        if (k > t) t = k;
    }
    return t;
}


/* Everything a captured launch depends on: the graph and range, scratch, and per node and per source its op,
 * type, shape, strides, parameters and address.  Equal keys launch the same kernels on the same memory. */
static uint64_t range_key(const mf_cuda_ctx *c, const mf_graph *g, int32_t first, int32_t last) {
    uint64_t h = 1469598103934665603ull;
#define MIX(v) (h = (h ^ (uint64_t)(v)) * 1099511628211ull)
    MIX((uintptr_t)g);
    MIX((uint32_t)first);
    MIX((uint32_t)last);
    MIX((uintptr_t)c->scratch);
    MIX(c->scratch_bytes);
    for (int32_t i = first; i < last; i++) {
        const mf_node *n = mf_graph_node_c(g, i);
        MIX((uint32_t)n->op);
        MIX(n->type);
        MIX((uintptr_t)n->data);
        for (int d = 0; d < MF_MAX_DIMS; d++) MIX((uint64_t)n->ne[d]), MIX(n->nb[d]);
        for (int k = 0; k < 4; k++) MIX((uint32_t)n->iparams[k]);
        for (int k = 0; k < (int)(sizeof n->fparams / sizeof n->fparams[0]); k++) MIX(mf_f32_bits(n->fparams[k]));
        for (int k = 0; k < MF_MAX_SRC; k++) {
            MIX((uint32_t)n->src[k]);
            if (n->src[k] < 0) continue;
            const mf_node *s = mf_graph_node_c(g, n->src[k]);
            MIX((uintptr_t)s->data);
            MIX(s->type);
            for (int d = 0; d < MF_MAX_DIMS; d++) MIX((uint64_t)s->ne[d]), MIX(s->nb[d]);
        }
    }
#undef MIX
    return h;
}

static graph_slot *find_slot(mf_cuda_pool *p, uint64_t key) {
    for (int i = 0; i < MF_CUDA_GRAPH_SLOTS; i++)
        if (p->slot[i].used && p->slot[i].key == key) return &p->slot[i];
    return NULL;
}

static graph_slot *victim(mf_cuda_pool *p) {
    graph_slot *v = &p->slot[0];
    for (int i = 1; i < MF_CUDA_GRAPH_SLOTS; i++)
        if (p->slot[i].used < v->used) v = &p->slot[i];
    if (v->used) (void)cudaGraphExecDestroy(v->exec);
    v->used = 0;
    return v;
}

static int launch_slot(mf_cuda_pool *p, graph_slot *s, int32_t first, int32_t last, mf_error *err) {
    s->used = ++p->tick;
    cudaError_t e = cudaGraphLaunch(s->exec, stream_of(p));
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return mf_err(err, MF_E_BACKEND, "cudaGraphLaunch of the captured nodes %d..%d failed: %s (%d: %s)", first, last - 1,
                      cudaGetErrorName(e), (int)e, cudaGetErrorString(e));
    }
    return 0;
}

/* Capture [first, last) into a graph under `key`, instantiate and launch it.  A launcher that needs more
 * scratch than is held fails inside the capture: scratch grows (outside it) and the capture is taken again.
 * A capture the runtime refuses (an API call a launcher makes that capture does not allow) turns graphs off
 * for this pool, once, loudly, and the range runs uncaptured - the same kernels, launched one by one. */
static int capture(mf_cuda_pool *p, const mf_graph *g, int32_t first, int32_t last, mf_error *err) {
    mf_cuda_ctx *c = &p->c;
    for (int attempt = 0; attempt < 2; attempt++) {
        const uint64_t key = range_key(c, g, first, last);
        cudaError_t e = cudaStreamBeginCapture(stream_of(p), cudaStreamCaptureModeThreadLocal);
        if (e != cudaSuccess) return api(e, "cudaStreamBeginCapture", err);
        c->capturing = true;
        mf_error cerr = {0};
        int rc = run_range(p, g, first, last, &cerr);
        c->capturing = false;
        cudaGraph_t graph = NULL;
        e = cudaStreamEndCapture(stream_of(p), &graph);
        if (rc || e != cudaSuccess) {
            if (graph) (void)cudaGraphDestroy(graph);
            (void)cudaGetLastError(); /* the capture's own refusal; the rerun below reports any real error */
            if (rc && c->scratch_want > c->scratch_bytes) {
                void *s = NULL;
                if ((rc = mf_cuda_scratch(c, c->scratch_want, &s, err))) return rc;
                continue;
            }
            if (!rc) {
                mf_log(MF_LOG_WARN, "CUDA graph capture of nodes %d..%d failed (%s: %s); running without CUDA graphs "
                       "from here on (MINFER_CUDA_GRAPHS=0 does that from the start)", first, last - 1,
                       cudaGetErrorName(e), cudaGetErrorString(e));
                p->graphs = false;
                drop_graphs(p);
            }
            /* a launcher refused while capturing: nothing ran, so run the range plainly, where its refusal
             * (or its success) is the real one */
            p->uncaptured++;
            return run_range(p, g, first, last, err);
        }
        cudaGraphExec_t exec = NULL;
        e = cudaGraphInstantiate(&exec, graph, 0);
        (void)cudaGraphDestroy(graph);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            mf_log(MF_LOG_WARN, "cudaGraphInstantiate of nodes %d..%d failed (%s: %s); running without CUDA graphs from "
                   "here on", first, last - 1, cudaGetErrorName(e), cudaGetErrorString(e));
            p->graphs = false;
            drop_graphs(p);
            p->uncaptured++;
            return run_range(p, g, first, last, err);
        }
        graph_slot *s = victim(p);
        s->key = key;
        s->exec = exec;
        p->captures++;
        return launch_slot(p, s, first, last, err);
    }
    p->uncaptured++;
    return run_range(p, g, first, last, err);
}

extern "C" int mf_cuda_pool_compute(mf_cuda_pool *p, mf_graph *g, int32_t first, int32_t last, mf_error *err) {
    mf_cuda_ctx *c = &p->c;
    c->g = g;
    p->last_first = first;
    p->last_last = last;
    if (last > first)
        snprintf(p->last_names, sizeof p->last_names, "'%.60s' .. '%.60s'", nname(mf_graph_node_c(g, first)),
                 nname(mf_graph_node_c(g, last - 1)));
    bool work = false;
    for (int32_t i = first; i < last && !work; i++) work = mf_op_computes(mf_graph_node_c(g, i)->op);
    if (!work) return 0;
    /* scratch grows to the largest request seen before anything is enqueued or captured */
    if (c->scratch_want > c->scratch_bytes) {
        void *s = NULL;
        int rc = mf_cuda_scratch(c, c->scratch_want, &s, err);
        if (rc) return rc;
    }
    if (!p->graphs || range_tokens(g, first, last) > MF_CUDA_GRAPH_MAX_TOKENS) {
        p->uncaptured++;
        return run_range(p, g, first, last, err);
    }
    const uint64_t key = range_key(c, g, first, last);
    graph_slot *s = find_slot(p, key);
    if (s) {
        p->replays++;
        return launch_slot(p, s, first, last, err);
    }
    /* a key's first run is plain: the launchers size scratch and opt into shared memory there (calls a
     * capture may not contain), and a range seen once only (a prompt's last chunk) costs no capture */
    bool seen = false;
    for (int i = 0; i < MF_CUDA_GRAPH_SLOTS; i++) seen |= p->warm[i] == key;
    if (!seen) {
        p->warm[p->warm_next] = key;
        p->warm_next = (p->warm_next + 1) % MF_CUDA_GRAPH_SLOTS;
        p->uncaptured++;
        return run_range(p, g, first, last, err);
    }
    return capture(p, g, first, last, err);
}

extern "C" int mf_cuda_pool_sync(mf_cuda_pool *p, mf_error *err) {
    cudaError_t e = cudaStreamSynchronize(stream_of(p));
    if (e == cudaSuccess) return 0;
    (void)cudaGetLastError();
    return mf_err(err, MF_E_BACKEND,
                  "a CUDA kernel failed while running nodes %d..%d (%s): %s (%d: %s); asynchronous failures surface at "
                  "the next synchronization - CUDA_LAUNCH_BLOCKING=1 (and MINFER_CUDA_GRAPHS=0) make the failing "
                  "launch report itself",
                  p->last_first, p->last_last - 1, p->last_names[0] ? p->last_names : "none enqueued yet",
                  cudaGetErrorName(e), (int)e, cudaGetErrorString(e));
}

/* ---- host access and the cross copy ---- */

extern "C" int mf_cuda_pool_write(mf_cuda_pool *p, void *dst, const void *src, size_t n, mf_error *err) {
    /* from pageable memory the bytes are taken before this returns; the copy is ordered before later compute */
    cudaError_t e = cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream_of(p));
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return mf_err(err, MF_E_BACKEND, "cudaMemcpyAsync host to device (%zu bytes) failed: %s (%d: %s)", n,
                      cudaGetErrorName(e), (int)e, cudaGetErrorString(e));
    }
    return 0;
}

extern "C" int mf_cuda_pool_read(mf_cuda_pool *p, const void *src, void *dst, size_t n, mf_error *err) {
    cudaError_t e = cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, stream_of(p));
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return mf_err(err, MF_E_BACKEND, "cudaMemcpyAsync device to host (%zu bytes) failed: %s (%d: %s)", n,
                      cudaGetErrorName(e), (int)e, cudaGetErrorString(e));
    }
    int rc = mf_cuda_pool_sync(p, err);
    return rc ? mf_err_prefix(err, rc, "reading %zu bytes back from the device", n) : 0;
}

extern "C" int mf_cuda_pool_copy_out(mf_cuda_pool *p, const void *src, void *dst, size_t n, void **ticket,
                                     mf_error *err) {
    /* events are recorded on the one stream in order, so reusing one whose copy is still pending is safe:
     * waiting on its later record waits for the earlier copy too */
    cudaEvent_t *ev = &p->ev[p->ev_next];
    p->ev_next = (p->ev_next + 1) % MF_CUDA_EVENTS;
    int rc = 0;
    if (!*ev && (rc = api(cudaEventCreateWithFlags(ev, cudaEventDisableTiming), "cudaEventCreateWithFlags", err))) {
        *ev = NULL;
        return rc;
    }
    cudaError_t e = cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, stream_of(p));
    if (e == cudaSuccess) e = cudaEventRecord(*ev, stream_of(p));
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return mf_err(err, MF_E_BACKEND, "enqueuing a %zu-byte device to host copy failed: %s (%d: %s)", n,
                      cudaGetErrorName(e), (int)e, cudaGetErrorString(e));
    }
    *ticket = (void *)*ev;
    return 0;
}

extern "C" int mf_cuda_pool_await(mf_cuda_pool *p, void *ticket, mf_error *err) {
    cudaError_t e = cudaEventSynchronize((cudaEvent_t)ticket);
    if (e == cudaSuccess) return 0;
    (void)cudaGetLastError();
    return mf_err(err, MF_E_BACKEND, "waiting for a device to host copy (after nodes %d..%d) failed: %s (%d: %s)",
                  p->last_first, p->last_last - 1, cudaGetErrorName(e), (int)e, cudaGetErrorString(e));
}
