/* server/breakers: the cache of resolved DRY sequence breakers (breakers.h). */
#include "server/breakers.h"

#include "core/core.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *key; /* the strings, each with its NUL */
    size_t key_len;
    mf_dry_breakers *b;
} set;

struct mf_srv_breakers {
    pthread_mutex_t mu;
    set sets[MF_SRV_BREAKER_SETS];
    int32_t n;
};

int mf_srv_breakers_new(mf_srv_breakers **out, mf_error *err) {
    *out = calloc(1, sizeof **out);
    if (!*out) return mf_err(err, MF_E_NOMEM, "out of memory");
    pthread_mutex_init(&(*out)->mu, NULL);
    return 0;
}

void mf_srv_breakers_free(mf_srv_breakers *c) {
    if (!c) return;
    for (int32_t i = 0; i < c->n; i++) {
        free(c->sets[i].key);
        mf_dry_breakers_free(c->sets[i].b);
    }
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static char *make_key(const char *const *strs, int32_t n, size_t *len) {
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) total += strlen(strs[i]) + 1;
    char *k = malloc(total ? total : 1), *p = k;
    if (!k) return NULL;
    for (int32_t i = 0; i < n; i++) {
        const size_t l = strlen(strs[i]) + 1;
        memcpy(p, strs[i], l);
        p += l;
    }
    *len = total;
    return k;
}

int mf_srv_breakers_get(mf_srv_breakers *c, const mf_model *model, const char *const *strs, int32_t n,
                        const mf_dry_breakers **out, mf_dry_breakers **own, mf_error *err) {
    *out = NULL, *own = NULL;
    size_t len;
    char *key = make_key(strs, n, &len);
    if (!key) return mf_err(err, MF_E_NOMEM, "out of memory");
    int rc = 0;
    pthread_mutex_lock(&c->mu); /* a first build holds the others back for its 15 ms: they would build the same */
    for (int32_t i = 0; i < c->n && !*out; i++)
        if (c->sets[i].key_len == len && !memcmp(c->sets[i].key, key, len)) *out = c->sets[i].b;
    if (!*out && c->n < MF_SRV_BREAKER_SETS) {
        mf_dry_breakers *b = NULL;
        if (!(rc = mf_dry_breakers_new(model, strs, n, &b, err))) {
            c->sets[c->n++] = (set){key, len, b};
            *out = b;
            key = NULL;
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (!rc && !*out && !(rc = mf_dry_breakers_new(model, strs, n, own, err))) *out = *own;
    free(key);
    return rc;
}

int32_t mf_srv_breakers_kept(mf_srv_breakers *c) {
    pthread_mutex_lock(&c->mu);
    const int32_t n = c->n;
    pthread_mutex_unlock(&c->mu);
    return n;
}

int32_t mf_srv_default_breakers(const char *const *strs, int32_t n, const char *const **out) {
    if (n < 0) return mf_dry_default_breakers(out);
    *out = strs;
    return n;
}

int mf_srv_req_resolve_dry(mf_srv_req *r, mf_srv_breakers *c, const mf_model *model, const char *const *def,
                           int32_t n_def, mf_srv_err *e) {
    if (!(r->sp.dry_multiplier > 0) || r->sp.dry_last_n == 0) return 0; /* DRY off: nothing to resolve */
    const char *const *strs = (const char *const *)r->dry_seq;
    int32_t n = r->n_dry_seq;
    if (!n) n = mf_srv_default_breakers(def, n_def, &strs);
    if (!n) return 0; /* the server runs DRY without breakers (--dry-sequence-breaker none) */
    mf_error err = {0};
    const int rc = mf_srv_breakers_get(c, model, strs, n, &r->sp.dry_breakers, &r->dry_own, &err);
    if (rc == MF_E_NOMEM) return mf_srv_fail(e, 500, "server_error", "dry_sequence_breakers", "%s", err.msg);
    if (rc) return mf_srv_fail(e, 400, "invalid_request_error", "dry_sequence_breakers", "%s", err.msg);
    return 0;
}
