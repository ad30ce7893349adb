/* graph internals shared by graph.c, alloc.c, cache.c and export.c (not an interface). */
#ifndef MF_GRAPH_INTERNAL_H
#define MF_GRAPH_INTERNAL_H

#include "graph/graph.h"

struct mf_graph {
    mf_node *nodes;
    int32_t n_nodes, cap;

    /* first builder error; err_fresh: the failing builder was the latest builder call, so an
     * mf_g_name(MF_NODE_INVALID, ...) right after it names the node in the message */
    mf_error err;
    bool has_err, err_fresh;
    char err_op[24], err_detail[880];
    int32_t err_id;

    /* allocation: one arena per backend (the node's backend id; -1 counts as 0, the CPU) */
    bool planned;
    size_t need[MF_GRAPH_ARENAS];  /* bytes each backend's arena must hold */
    void *bound[MF_GRAPH_ARENAS];  /* the bases the data pointers point into now */
    void *own[MF_GRAPH_ARENAS];    /* host arenas mf_graph_alloc made (freed with the graph) */
    uint64_t *offs; /* per node: byte offset in its backend's arena, UINT64_MAX when not arena-backed */
};

#endif
