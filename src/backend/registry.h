/* registry: the backend id space, the registered set, the name fence and its refusals.
 *
 * A backend is a small value (mf_backend) over a FIXED id space: cpu = 0, metal = 1, cuda = 2 on every
 * build, compiled in or not.  Ids are written into session files and graph exports, so they are a
 * file-format contract: appended, never renumbered.  Names are `cpu`, `metal`, `cuda` (the canonical
 * spelling every message uses); diagnostics print `CPU`, `Metal`, `Cuda` (mf_backend_debug_name).
 *
 * The registry is one entry per compiled-in backend in a fixed array indexed by id, built once (first
 * use) and read-only after.  Two orders exist and are not the same: the identity order (by id, which is
 * also the Ord of the handle) and the priority order (mf_backend_by_priority: priority descending, then
 * id - a total order; metal 300 > cuda 200 > cpu 100).  Nothing here iterates a hash map.
 *
 * Capability authority: each backend owns its op x dtype support function (cpu: mf_cpu_supports); the
 * entry points at it and assignment calls it.  The registry keeps no copy of the answers.  The one
 * capability the registry itself carries is reads_packed_kv (asked about a KV format, not an engine).
 *
 * The fence (--backend NAME / MINFER_BACKENDS=<csv>) removes backends, never adds one; cpu is always
 * allowed.  Two stages, both before any model is loaded:
 *   stage 1 (names, pure):  unknown name; known but not compiled into this build;
 *   stage 2 (availability): a NAMED, compiled-in backend this machine cannot use.
 * Unset means every backend this build has and this machine can use; MINFER_DISABLE_CUDA (presence)
 * keeps meaning "do not use the device" - with nothing named it is not a refusal, the run is CPU. */
#ifndef MF_BACKEND_REGISTRY_H
#define MF_BACKEND_REGISTRY_H

#include "core/core.h"
#include "graph/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The fixed id space.  MF_BACKEND_TEST_ID is a slot only a test binary can fill
 * (mf_backend_register_test); it has no name in the known-name list and is never written to disk. */
enum {
    MF_BACKEND_ID_CPU = 0,
    MF_BACKEND_ID_METAL = 1,
    MF_BACKEND_ID_CUDA = 2,
    MF_N_KNOWN_BACKENDS = 3, /* cpu, metal, cuda: the names a user can ask for */
    MF_BACKEND_TEST_ID = 7,
    MF_BACKEND_SLOTS = 8, /* size of every per-id table (ids 3..6 are reserved for future backends) */
};

typedef struct mf_backend {
    uint16_t id;
} mf_backend;

#define MF_BACKEND_CPU ((mf_backend){MF_BACKEND_ID_CPU})
#define MF_BACKEND_METAL ((mf_backend){MF_BACKEND_ID_METAL})
#define MF_BACKEND_CUDA ((mf_backend){MF_BACKEND_ID_CUDA})

/* The only ways in and out of the id space. */
static inline int mf_backend_index(mf_backend b) { return (int)b.id; }
/* False (and *out untouched) for an index outside the slot table. */
bool mf_backend_from_index(int index, mf_backend *out);
static inline bool mf_backend_eq(mf_backend a, mf_backend b) { return a.id == b.id; }
/* Ord by id: CPU < Metal < Cuda (negative, 0, positive). */
static inline int mf_backend_cmp(mf_backend a, mf_backend b) { return (int)a.id - (int)b.id; }
/* "cpu" | "metal" | "cuda" | "test" (registered test slot) | "unknown". */
const char *mf_backend_name(mf_backend b);
/* "CPU" | "Metal" | "Cuda" | "Test" | "Unknown": the diagnostic spelling. */
const char *mf_backend_debug_name(mf_backend b);

/* Resolve a user-typed name (case-insensitive, surrounding whitespace trimmed) to its handle.  Known
 * names resolve on every build whether compiled in or not.  Unknown -> MF_E_NOTFOUND with
 *   unknown backend 'gpu2'; known backends are: cpu, metal, cuda */
int mf_backend_parse(const char *name, mf_backend *out, mf_error *err);

/* ---- the registry table ---- */

typedef struct mf_backend_caps {
    bool reads_packed_kv; /* can read a packed (q8_0) KV region */
} mf_backend_caps;

/* Options a backend's pool is brought up with (lazy enable). */
typedef struct mf_backend_opts {
    int n_threads; /* CPU worker threads; 0 = one per online core */
} mf_backend_opts;

/* A device's memory, as one of three outcomes (the offload plan's input): known (free and total bytes),
 * unknown (no answer to be had: no query, or a device that reports none), failed (the query itself
 * failed; `why` names the error, e.g. "cudaErrorIllegalAddress (700)"). */
typedef enum { MF_MEM_KNOWN = 0, MF_MEM_UNKNOWN = 1, MF_MEM_FAILED = 2 } mf_mem_outcome;
typedef struct mf_mem_info {
    mf_mem_outcome outcome;
    uint64_t free_bytes, total_bytes; /* KNOWN only */
    char why[128];                    /* FAILED: the error; UNKNOWN: why there is no answer */
} mf_mem_info;

/* One entry per backend; hooks take the backend's pool (its instance, created by `enable` and held by
 * a scheduler context).  Optional hooks may be NULL where stated. */
typedef struct mf_backend_entry {
    mf_backend handle;
    const char *name; /* canonical lower-case name */
    uint16_t priority;
    mf_backend_caps caps;
    /* The backend's own op x dtype support function (type rule: the node's type, except MATMUL and
     * GET_ROWS use src0's type).  A pointer to the authority, not a copy of its answers. */
    bool (*supports)(mf_op op, uint32_t type);
    /* Runtime probe: NULL when usable here, else the reason (static string). */
    const char *(*unavailable)(void);
    /* Lazy enable: bring the pool up.  release frees it. */
    int (*enable)(const mf_backend_opts *opts, void **pool, mf_error *err);
    void (*release)(void *pool);
    /* Execute nodes [first, last) of an allocated graph, in order.  Every node in the range carries
     * this backend's id (or is a no-op alias/leaf); staged inputs are already readable. */
    int (*compute)(void *pool, mf_graph *g, int32_t first, int32_t last, mf_error *err);
    /* Optional: retire outstanding work at a split boundary / the final flush.  NULL = synchronous. */
    int (*synchronize)(void *pool, mf_error *err);
    /* Host access to a node's bytes [offs, offs + n) (binding inputs, reading logits, blocking copies). */
    int (*host_read)(void *pool, const mf_node *node, size_t offs, void *dst, size_t n, mf_error *err);
    int (*host_write)(void *pool, mf_node *node, size_t offs, const void *src, size_t n, mf_error *err);
    /* Cross-backend copy, phase A (enqueue): start moving `n` bytes of `node` (this backend's value)
     * into `staging` for backend `dst`.  *issued = true: the transfer is in flight and `*ticket` is
     * handed to await_cross; *issued = false: declined - the scheduler does a blocking host round trip
     * instead (counted as a blocking copy).  Optional (NULL = always declined). */
    int (*copy_cross)(void *pool, const mf_node *node, void *staging, size_t n, mf_backend dst, void **ticket,
                      bool *issued, mf_error *err);
    /* Phase B (await): after it returns 0 the staging bytes are complete.  Called exactly once per
     * issued phase A.  Optional only if copy_cross is NULL. */
    int (*await_cross)(void *pool, void *ticket, mf_error *err);
    /* KV element type (mf_type) this backend stores by default. */
    uint32_t (*kv_format)(void *pool);

    /* ---- memory: the buffer hooks (device-level: no pool, so a model can place its weights before any
     * context exists).  An address a backend hands out means something only to that backend: a host
     * backend's (buf_is_host) is a plain pointer anyone may read in place; any other backend's is an
     * opaque value that only its own hooks and compute may interpret - nothing else dereferences it.
     * Offsets are plain address arithmetic (addr + k is byte k of the allocation) for every backend. */
    bool buf_is_host;
    /* Allocate `size` bytes (zero-filled, 64-byte aligned for a host backend). */
    int (*buf_alloc)(size_t size, void **addr, mf_error *err);
    void (*buf_free)(void *addr); /* NULL is a no-op */
    /* Host -> backend and backend -> host, n bytes at addr (which may be inside an allocation). */
    int (*buf_write)(void *addr, const void *src, size_t n, mf_error *err);
    int (*buf_read)(const void *addr, void *dst, size_t n, mf_error *err);
    /* Optional: copy n bytes from backend src's address into this backend's dst_addr without the host
     * (same backend, or a peer it can reach).  *done = false: not possible, the caller bounces through
     * the host (mf_backend_copy). */
    int (*buf_copy_from)(mf_backend src, const void *src_addr, void *dst_addr, size_t n, bool *done, mf_error *err);
    /* Optional: the layout this backend wants a weight matrix in (K x N of `type`), for the weights it
     * owns; `type` itself (or NULL) = the file's layout.  The CPU answers its repacked x8/x16 layouts. */
    uint32_t (*weight_layout)(uint32_t type, int64_t K, int64_t N);
    /* Optional: the device memory query (NULL = unknown). */
    void (*mem_info)(mf_mem_info *out);
} mf_backend_entry;

/* The buffer hooks of backend b through the registry (refusals name the backend): alloc/free, is-host,
 * host <-> backend, and a cross-backend copy that takes the destination's buf_copy_from when it can and
 * bounces through a host buffer otherwise (both host: a memcpy). */
int mf_backend_alloc(mf_backend b, size_t size, void **addr, mf_error *err);
void mf_backend_free(mf_backend b, void *addr);
bool mf_backend_is_host(mf_backend b);
int mf_backend_write(mf_backend b, void *addr, const void *src, size_t n, mf_error *err);
int mf_backend_read(mf_backend b, const void *addr, void *dst, size_t n, mf_error *err);
int mf_backend_copy(mf_backend src, const void *src_addr, mf_backend dst, void *dst_addr, size_t n, mf_error *err);
/* b's memory query (UNKNOWN, with the reason, for a backend without one or not in this build). */
void mf_backend_mem_info(mf_backend b, mf_mem_info *out);
/* The layout b stores a weight matrix in (the file's type when b has no preference). */
uint32_t mf_backend_weight_layout(mf_backend b, uint32_t type, int64_t K, int64_t N);

/* The entry of a compiled-in (registered) backend, else NULL (a known name this build lacks, or an id
 * nothing fills).  Builds the registry on first use. */
const mf_backend_entry *mf_backend_entry_get(mf_backend b);
bool mf_backend_compiled(mf_backend b);
/* Why a known backend is not in this build (NULL if it is, or the id is not a known backend). */
const char *mf_backend_not_compiled_reason(mf_backend b);
/* The registered backends in priority order (priority descending, then id), restricted to `allowed`
 * when non-NULL (indexed by id).  Writes at most MF_BACKEND_SLOTS handles; returns the count. */
int mf_backend_by_priority(const bool *allowed, mf_backend out[MF_BACKEND_SLOTS]);
/* Placement priority: the entry's number, or for a known backend this build lacks its pinned number
 * (metal 300, cuda 200, cpu 100); 0 for an id no backend has. */
uint16_t mf_backend_priority(mf_backend b);
/* The registry's one capability: false for a backend this build lacks. */
bool mf_backend_reads_packed_kv(mf_backend b);
/* Runtime probe of a registered backend: NULL when usable, else the reason.  A known backend this build
 * lacks answers its not-compiled reason. */
const char *mf_backend_unavailable(mf_backend b);

/* Tests only: fill MF_BACKEND_TEST_ID with `e` (copied; e->handle must be that id).  Must run before
 * the registry is first used; afterwards MF_E_INVAL.  Never called by libminfer or minfer. */
int mf_backend_register_test(const mf_backend_entry *e, mf_error *err);

/* ---- the fence ---- */

/* Two facts per backend, indexed by id: allowed (may this run use it?) and requested (did the request
 * name it?).  `named` is false when neither --backend nor MINFER_BACKENDS was given. */
typedef struct mf_backend_filter {
    bool allowed[MF_BACKEND_SLOTS];
    bool requested[MF_BACKEND_SLOTS];
    bool named;
} mf_backend_filter;

/* Stage 1: parse the request.  `values` are the --backend values (each a csv; n_values may be 0);
 * when n_values == 0, `env` (MINFER_BACKENDS, may be NULL; empty/blank counts as unset) is used - the
 * flag wins when both are present.  Refusals (MF_E_NOTFOUND / MF_E_UNSUPPORTED, err->msg without the
 * "Error: " prefix):
 *   unknown backend 'gpu2'; known backends are: cpu, metal, cuda
 *   backend 'cuda' is known but not compiled into this build: the CUDA backend is compiled only with make CUDA=1
 *   backend 'metal' is known but not compiled into this build: Metal is compiled only on macOS
 * A value with no names in it (--backend '' or ' , ') is MF_E_INVAL.  On success `out` holds the
 * request: requested[] as named, allowed[] = requested + cpu (or every registered backend when nothing
 * was named) - not yet narrowed by availability. */
int mf_backend_filter_parse(const char *const *values, int n_values, const char *env, mf_backend_filter *out,
                            mf_error *err);
/* Stage 2: a named, compiled-in backend whose probe fails is refused (MF_E_BACKEND):
 *   backend 'cuda' is compiled in but not available on this machine: no CUDA device is available, or
 *   CUDA is disabled (MINFER_DISABLE_CUDA)
 * Unnamed backends that are unavailable are simply not allowed.  cpu stays allowed. */
int mf_backend_filter_resolve(mf_backend_filter *f, mf_error *err);

/* The process-wide fence: set once in main (before dispatch, before anything reads it); read-only
 * after.  mf_backend_fence_install copies `f` (already resolved); a second install, or an install after
 * the first read, is MF_E_INVAL.  mf_backend_fence() returns the installed fence, or - for library users
 * that never install one - the default (every registered backend this machine can use), computed once. */
int mf_backend_fence_install(const mf_backend_filter *f, mf_error *err);
const mf_backend_filter *mf_backend_fence(void);
/* Shorthand: mf_backend_fence()->allowed[b]. */
bool mf_backend_allowed(mf_backend b);

#ifdef __cplusplus
}
#endif

#endif
