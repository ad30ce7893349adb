/* server/breakers: DRY sequence breakers resolved against the model once per distinct set.  Resolving one
 * reads every token's text (15 ms for llama-server's four defaults over Qwen's vocabulary), and clients send
 * the same set with every request, so the server keeps what it built. */
#ifndef MF_SERVER_BREAKERS_H
#define MF_SERVER_BREAKERS_H

#include "minfer.h"
#include "server/request.h"

enum { MF_SRV_BREAKER_SETS = 8 }; /* distinct sets kept; a request with another one builds its own */

typedef struct mf_srv_breakers mf_srv_breakers;

int mf_srv_breakers_new(mf_srv_breakers **out, mf_error *err);
void mf_srv_breakers_free(mf_srv_breakers *c);
/* The breakers for strs[0..n) (n > 0, each non-empty) over model: *out is the cache's (valid until
 * mf_srv_breakers_free) or, once MF_SRV_BREAKER_SETS sets are kept, *own, built for the caller alone (free it
 * with mf_dry_breakers_free).  Any thread. */
int mf_srv_breakers_get(mf_srv_breakers *c, const mf_model *model, const char *const *strs, int32_t n,
                        const mf_dry_breakers **out, mf_dry_breakers **own, mf_error *err);
int32_t mf_srv_breakers_kept(mf_srv_breakers *c); /* sets kept (tests) */

/* The server's default breakers: strs[0..n), or with n -1 llama-server's "\n", ":", "\"", "*". */
int32_t mf_srv_default_breakers(const char *const *strs, int32_t n, const char *const **out);
/* A request with DRY on: its breakers (the server's defaults def[0..n_def) when it sent none, n_def as
 * mf_srv_default_breakers takes it) resolved through the cache into r->sp.dry_breakers (r->dry_own when the
 * request had to build its own). */
int mf_srv_req_resolve_dry(mf_srv_req *r, mf_srv_breakers *c, const mf_model *model, const char *const *def,
                           int32_t n_def, mf_srv_err *e);

#endif
