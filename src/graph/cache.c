/* graph cache: a few built graphs keyed by their params, most-recently-used first. */
#include "graph/graph_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    mf_graph_key key;
    mf_graph *g;
    mf_graph_io io;
} cache_entry;

struct mf_graph_cache {
    cache_entry *e; /* e[0] is the most recently used */
    int n, cap;
    int hits, misses;
};

mf_graph_cache *mf_graph_cache_new(int capacity) {
    if (capacity < 1) capacity = 1;
    mf_graph_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->e = calloc((size_t)capacity, sizeof *c->e);
    if (!c->e) {
        free(c);
        return NULL;
    }
    c->cap = capacity;
    return c;
}

void mf_graph_cache_free(mf_graph_cache *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) mf_graph_free(c->e[i].g);
    free(c->e);
    free(c);
}

static bool key_eq(const mf_graph_key *a, const mf_graph_key *b) {
    return a->n_tokens == b->n_tokens && a->n_outputs == b->n_outputs && a->flags == b->flags;
}

static int find(const mf_graph_cache *c, const mf_graph_key *key) {
    for (int i = 0; i < c->n; i++)
        if (key_eq(&c->e[i].key, key)) return i;
    return -1;
}

static void to_front(mf_graph_cache *c, int i) {
    cache_entry t = c->e[i];
    memmove(&c->e[1], &c->e[0], (size_t)i * sizeof t);
    c->e[0] = t;
}

mf_graph *mf_graph_cache_get(mf_graph_cache *c, const mf_graph_key *key, mf_graph_io *io) {
    if (!c || !key) return NULL;
    int i = find(c, key);
    if (i < 0) {
        c->misses++;
        return NULL;
    }
    c->hits++;
    to_front(c, i);
    if (io) *io = c->e[0].io;
    return c->e[0].g;
}

void mf_graph_cache_put(mf_graph_cache *c, const mf_graph_key *key, mf_graph *g, const mf_graph_io *io) {
    if (!c || !key) {
        mf_graph_free(g);
        return;
    }
    const mf_graph_io none = {-1, -1, -1, -1, -1, -1};
    int i = find(c, key);
    if (i >= 0) {
        if (c->e[i].g != g) mf_graph_free(c->e[i].g);
        c->e[i].g = g;
        c->e[i].io = io ? *io : none;
        to_front(c, i);
        return;
    }
    if (c->n == c->cap) {
        mf_graph_free(c->e[c->n - 1].g); /* least recently used */
        c->n--;
    }
    memmove(&c->e[1], &c->e[0], (size_t)c->n * sizeof c->e[0]);
    c->e[0].key = *key;
    c->e[0].g = g;
    c->e[0].io = io ? *io : none;
    c->n++;
}

int mf_graph_cache_hits(const mf_graph_cache *c) {
    return c ? c->hits : 0;
}
int mf_graph_cache_misses(const mf_graph_cache *c) {
    return c ? c->misses : 0;
}
