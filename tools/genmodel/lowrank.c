/* Agreeing target/draft pairs for speculative decoding (docs/GENMODEL.md, "Speculative decoding pairs").
 *
 * The target's token embeddings are rank r: E[t] = A[t] P, P an r x d map with rows of norm about 1
 * (and an untied head H[t] = B[t] P).  With the final RMS norm's gain g, the target's logits without its
 * layers are H[t] . (g * E[s]) / rms(E[s]) = A[t] P diag(g) P^T A[s] / rms(E[s]) (B for an untied head):
 * a bigram that a model of hidden size r computes exactly - embeddings A, unit norm gain, head
 * A M with M = P diag(g) P^T (RMS norm only rescales by a positive factor, so the argmax is the same; the
 * sqrt(d/r) factor puts the draft's logits on the target's scale, so its probabilities are comparable).
 * The target's layers (scaled by --layer-scale) then move its predictions away from the bigram: that
 * scale sets the acceptance rate.  Rows are streamed from their own PRNG streams, the same in both files. */
#include "genmodel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define GM_LOWRANK_LOGIT_STD 30.0f

int gm_lowrank_init(const gm_config *c, gm_lowrank *lr, mf_error *err) {
    memset(lr, 0, sizeof *lr);
    const gm_preset *t = c->draft ? &c->target : &c->p;
    lr->r = c->lowrank;
    lr->d = t->n_embd;
    const int r = lr->r, d = lr->d;
    lr->P = malloc(sizeof *lr->P * (size_t)r * (size_t)d);
    float *g = malloc(sizeof *g * (size_t)d);
    if (!lr->P || !g) {
        free(g);
        gm_lowrank_free(lr);
        return mf_err(err, MF_E_NOMEM, "out of memory for the rank-%d map", r);
    }
    gm_rng rng;
    gm_rng_seed(&rng, c->seed, "lowrank.P");
    gm_rng_fill(&rng, lr->P, (int64_t)r * d, 0.0f, 1.0f / sqrtf((float)d));
    if (c->draft) {
        /* the target's output_norm.weight exactly as its file has it (one row of d values) */
        gm_rng_seed(&rng, c->seed, "output_norm.weight");
        gm_rng_fill(&rng, g, d, 0.0f, 1.0f);
        lr->M = malloc(sizeof *lr->M * (size_t)r * (size_t)r);
        if (!lr->M) {
            free(g);
            gm_lowrank_free(lr);
            return mf_err(err, MF_E_NOMEM, "out of memory for the rank-%d map", r);
        }
        const double k = sqrt((double)d / r);
        for (int i = 0; i < r; i++)
            for (int j = 0; j < r; j++) {
                double s = 0;
                for (int x = 0; x < d; x++) s += (double)lr->P[i * d + x] * g[x] * lr->P[j * d + x];
                lr->M[i * r + j] = (float)(s * k);
            }
    }
    free(g);
    return 0;
}

void gm_lowrank_free(gm_lowrank *lr) {
    free(lr->P);
    free(lr->M);
    free(lr->a);
    lr->P = lr->M = lr->a = NULL;
    lr->a_cap = 0;
}

/* One in 128 rows twice as long (as the generator's hot rows): a heavy upper tail of logits */
static void hot(gm_rng *h, float *a, int r, int64_t nr) {
    for (int64_t k = 0; k < nr; k++) {
        if (gm_rng_u64(h) % 128) continue;
        for (int j = 0; j < r; j++) a[k * r + j] *= 2.0f;
    }
}

void gm_lowrank_begin(const gm_config *c, gm_lowrank *lr, bool head) {
    const bool tied = c->draft ? c->target.tied : c->p.tied;
    /* the factor rows: A for the embedding (and a tied head), B for an untied head */
    const bool use_b = head && !tied;
    gm_rng_seed(&lr->a_rng, c->seed, use_b ? "lowrank.B" : "lowrank.A");
    gm_rng_seed(&lr->h_rng, c->seed, use_b ? "lowrank.B#hot" : "lowrank.A#hot");
}

int gm_lowrank_rows(const gm_config *c, gm_lowrank *lr, bool head, int64_t nr, float *rows, mf_error *err) {
    const int r = lr->r, d = lr->d;
    if (nr > lr->a_cap) {
        free(lr->a);
        if (!(lr->a = malloc(sizeof *lr->a * (size_t)r * (size_t)nr)))
            return mf_err(err, MF_E_NOMEM, "out of memory for %lld rank-%d rows", (long long)nr, r);
        lr->a_cap = nr;
    }
    float *A = lr->a;
    gm_rng_fill(&lr->a_rng, A, (int64_t)r * nr, 0.0f, GM_LOWRANK_LOGIT_STD / sqrtf((float)r));
    hot(&lr->h_rng, A, r, nr);
    if (c->draft && !head) {
        memcpy(rows, A, sizeof *rows * (size_t)r * (size_t)nr);
        return 0;
    }
    const float *W = c->draft ? lr->M : lr->P; /* r x r, or r x d */
    const int n = c->draft ? r : d;
    for (int64_t k = 0; k < nr; k++) {
        const float *a = A + k * r;
        float *o = rows + k * n;
        int j = 0;
        /* eight outputs at a time in registers (the compiler's SLP pass makes them vector lanes); each
         * output is still 0 + a[0] w[0][j] + a[1] w[1][j] + ... in x order: the same bits everywhere */
        for (; j + 8 <= n; j += 8) {
            float acc[8] = {0};
            for (int x = 0; x < r; x++)
                for (int t = 0; t < 8; t++) acc[t] += a[x] * W[(size_t)x * n + j + t];
            memcpy(o + j, acc, sizeof acc);
        }
        for (; j < n; j++) {
            float acc = 0;
            for (int x = 0; x < r; x++) acc += a[x] * W[(size_t)x * n + j];
            o[j] = acc;
        }
    }
    return 0;
}
