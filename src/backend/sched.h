/* sched: backend assignment, splits, and the cross-backend staging copies.
 *
 * Assignment (build time, mf_sched_assign): each node goes to the highest-priority ALLOWED backend whose
 * own support function takes (op, type) - type is the node's type except MATMUL/GET_ROWS, which use
 * src0's (mf_node_support_type).  Aliases (VIEW/RESHAPE/PERMUTE, and any node with view_src such as
 * KV_STORE) follow the backend of the memory they alias; a non-view alias (KV_STORE) must be supported
 * there.  A node no allowed backend supports is an error naming the node, its op and type - never a
 * silent fallback.
 *
 * Execution (mf_sched_compute): the graph is cut, in creation order, into contiguous same-backend
 * splits.  A value a split reads from another backend is staged once per (node, destination backend):
 *   phase A (enqueue) at the split's start - the SOURCE backend's copy_cross; all of a boundary's
 *            inputs are enqueued before any is waited on; a second request for a pending entry is
 *            the same transfer (no-op, not counted);
 *   phase B (await) at the consumer's first read - exactly one per phase A; a value nothing reads is
 *            awaited by the drain after the last split.
 * Reading a staged value before its await is refused (mf_sched_cross_input), never a silent read.
 * A source that declines phase A (or MINFER_SYNC_COPIES set) gets a blocking host round trip, counted
 * in blocking_copies; it still takes its one phase B.  While a split runs, each staged node's data
 * pointer points at its staging buffer; it is restored when the split ends. */
#ifndef MF_BACKEND_SCHED_H
#define MF_BACKEND_SCHED_H

#include "backend/registry.h"

/* The type the support functions are asked about for node n (src0's type for MATMUL / GET_ROWS). */
uint32_t mf_node_support_type(const mf_graph *g, const mf_node *n);

/* Set node->backend for every node of g under `fence` (NULL = the process-wide mf_backend_fence()). */
int mf_sched_assign(mf_graph *g, const mf_backend_filter *fence, mf_error *err);

/* Assignment from a placement plan: a node of layer L (node->layer) goes to layer[L], anything outside the
 * blocks (layer -1: inputs, embeddings, output norm, LM head) to `io`.  Leaves (INPUT, WEIGHT, EXTERNAL)
 * live where the plan put their memory; aliases follow their root (a KV_STORE must be runnable there);
 * every other node must be runnable on its placed backend - no silent fallback: a node its backend
 * cannot run is an error naming the node, its layer, op and type and the backend.  A placed backend the
 * fence (NULL = mf_backend_fence()) does not allow is refused, naming it. */
typedef struct mf_placement {
    const uint16_t *layer; /* n_layer backend ids */
    int32_t n_layer;
    mf_backend io;
} mf_placement;
int mf_sched_assign_placed(mf_graph *g, const mf_placement *p, const mf_backend_filter *fence, mf_error *err);

typedef struct mf_split {
    mf_backend backend;
    int32_t first, last; /* node range [first, last) */
    int32_t n_inputs;    /* values this split reads from other backends (mf_sched_split_input) */
    int32_t input0;      /* internal: index of the first input */
} mf_split;

/* Per-context counters (since creation or the last reset). */
typedef struct mf_sched_stats {
    uint64_t copies;          /* phase A calls (a duplicate request for a pending entry is not counted) */
    uint64_t waits;           /* phase B calls (always == copies once a compute returned) */
    uint64_t blocking_copies; /* copies done as a blocking host round trip (declined or sync mode) */
    uint64_t drained;         /* waits issued by the drain (a staged value nothing read) */
} mf_sched_stats;

typedef struct mf_sched mf_sched;

/* opts: how a pool is brought up when the scheduler enables a backend lazily (NULL = defaults).
 * Sync mode starts as MINFER_SYNC_COPIES (presence). */
int mf_sched_new(const mf_backend_opts *opts, mf_sched **out, mf_error *err);
void mf_sched_free(mf_sched *s);
/* Hand the scheduler a pool it does not own (e.g. the engine's mf_cpu); before the backend is used. */
int mf_sched_set_pool(mf_sched *s, mf_backend b, void *pool, mf_error *err);
/* Pool access: the backend's pool, enabling it (entry->enable) on first use. */
int mf_sched_pool(mf_sched *s, mf_backend b, void **pool, mf_error *err);
void mf_sched_set_sync_copies(mf_sched *s, bool on);

/* Cut g (assigned, allocated) into splits and size the staging buffers.  mf_sched_compute calls this
 * itself when the graph, its shape or its assignment changed (keyed on the graph pointer plus a hash of
 * every node's backend, op, sources and size). */
int mf_sched_plan(mf_sched *s, mf_graph *g, mf_error *err);
int32_t mf_sched_n_splits(const mf_sched *s);
const mf_split *mf_sched_get_split(const mf_sched *s, int32_t i);
int32_t mf_sched_split_input(const mf_sched *s, const mf_split *sp, int32_t k); /* node id of input k */
/* Forget the plan (and free staging); the next compute plans again. */
void mf_sched_invalidate(mf_sched *s);

/* Run every split in order (see the header comment).  INPUT nodes must be bound. */
int mf_sched_compute(mf_sched *s, mf_graph *g, mf_error *err);

/* The staging protocol, exposed for tests and for callers that stage by hand (planned graph only). */
int mf_sched_copy_across(mf_sched *s, mf_graph *g, int32_t node, mf_backend dst, mf_error *err);
int mf_sched_await_cross(mf_sched *s, int32_t node, mf_backend dst, mf_error *err);
/* The checked accessor: the staging bytes of (node, dst); refuses (MF_E_BACKEND) an entry whose copy
 * was enqueued but not awaited, naming the missing wait, and one never copied. */
int mf_sched_cross_input(const mf_sched *s, int32_t node, mf_backend dst, void **data, mf_error *err);
/* As above, but issues a pending entry's wait first (the consumer's first read). */
int mf_sched_cross_input_ready(mf_sched *s, int32_t node, mf_backend dst, void **data, mf_error *err);
/* Await every still-pending entry (counted in waits and drained). */
int mf_sched_drain(mf_sched *s, mf_error *err);

/* Memory: plan g per backend (assign first) and bind it into this context's arenas - one per backend,
 * shared by every graph allocated here and grown to the largest need (so cached graphs cost one
 * worst-case arena per backend, not one arena each), allocated through each backend's buffer hooks.
 * Only one graph runs at a time, so sharing is safe; a graph's values do not survive another graph's
 * forward (read the outputs first).  mf_sched_bind re-points g when an arena moved since it was bound
 * (call it before each forward of a graph allocated here; O(1) when nothing moved). */
int mf_sched_alloc(mf_sched *s, mf_graph *g, mf_error *err);
void mf_sched_bind(mf_sched *s, mf_graph *g);
size_t mf_sched_arena_bytes(const mf_sched *s, mf_backend b);

/* Inputs and outputs: n bytes at offs of node's value, through the host_write / host_read hooks of the
 * backend the node lives on (a host backend's are a memcpy in place; nobody outside a backend touches
 * its memory).  A range outside the node is refused. */
int mf_sched_write(mf_sched *s, mf_graph *g, int32_t node, size_t offs, const void *src, size_t n, mf_error *err);
int mf_sched_read(mf_sched *s, mf_graph *g, int32_t node, size_t offs, void *dst, size_t n, mf_error *err);

mf_sched_stats mf_sched_get_stats(const mf_sched *s);
void mf_sched_reset_stats(mf_sched *s);

#endif
