/* server/embed: an embeddings request from its body to its answer (see embed.h). */
#include "server/embed.h"

#include "server/think.h"
#include "server/utf8.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mf_srv_embed_req_free(mf_srv_embed_req *r) {
    for (int32_t i = 0; r->ids && i < r->n; i++) free(r->ids[i]);
    free(r->ids);
    free(r->n_ids);
    memset(r, 0, sizeof *r);
}

/* An array of token ids (every element an integer in the vocabulary) into ids. */
static int token_array(const cJSON *a, int32_t n_vocab, const char *field, int32_t at, mf_token **ids, int32_t *n,
                       mf_srv_err *e) {
    int32_t k = cJSON_GetArraySize(a);
    if (k == 0) return mf_srv_fail(e, 400, "invalid_request_error", field, "'%s[%d]' is an empty array of tokens", field, at);
    if (!(*ids = malloc(sizeof **ids * (size_t)k))) return mf_srv_fail(e, 500, "server_error", "", "out of memory");
    const cJSON *v;
    int32_t i = 0;
    cJSON_ArrayForEach(v, a) {
        double d = cJSON_IsNumber(v) ? v->valuedouble : -1;
        if (!(d >= 0 && d < n_vocab && d == floor(d)))
            return mf_srv_fail(e, 400, "invalid_request_error", field,
                               "'%s' holds %s at token %d: token ids are integers in [0, %d)", field,
                               cJSON_IsNumber(v) ? "a number outside the vocabulary" : "a non-number", i, n_vocab);
        (*ids)[i++] = (mf_token)d;
    }
    *n = k;
    return 0;
}

/* Input i: a string (tokenized with special tokens parsed, BOS/EOS as the model asks) or token ids. */
static int one_input(const mf_model *model, int32_t n_vocab, const cJSON *v, const char *field, int32_t i,
                     mf_srv_embed_req *r, mf_srv_err *e) {
    if (cJSON_IsString(v)) {
        if (!*v->valuestring)
            return mf_srv_fail(e, 400, "invalid_request_error", field, "'%s[%d]' is an empty string", field, i);
        if (!mf_srv_utf8_valid(v->valuestring, strlen(v->valuestring))) /* a \ud800 escape decodes to a surrogate */
            return mf_srv_fail(e, 400, "invalid_request_error", field, "'%s[%d]' is not valid UTF-8", field, i);
        mf_error err = {0};
        if (mf_tokenize(model, v->valuestring, strlen(v->valuestring), true, true, &r->ids[i], &r->n_ids[i], &err))
            return mf_srv_fail(e, 400, "invalid_request_error", field, "'%s[%d]': %s", field, i, err.msg);
        return 0;
    }
    if (cJSON_IsArray(v)) return token_array(v, n_vocab, field, i, &r->ids[i], &r->n_ids[i], e);
    return mf_srv_fail(e, 400, "invalid_request_error", field,
                       "'%s[%d]' must be a string or an array of token ids", field, i);
}

/* The inputs: a string, an array of token ids, or an array of strings / token arrays. */
static int inputs(const mf_model *model, const cJSON *in, const char *field, mf_srv_embed_req *r, mf_srv_err *e) {
    mf_model_info info;
    mf_model_get_info(model, &info);
    const cJSON *first = cJSON_IsArray(in) ? cJSON_GetArrayItem(in, 0) : NULL;
    const bool one = cJSON_IsString(in) || (cJSON_IsArray(in) && cJSON_IsNumber(first));
    if (!one && !cJSON_IsArray(in))
        return mf_srv_fail(e, 400, "invalid_request_error", field,
                           "'%s' is required: a string, an array of strings, or token ids", field);
    r->n = one ? 1 : cJSON_GetArraySize(in);
    if (r->n == 0) return mf_srv_fail(e, 400, "invalid_request_error", field, "'%s' is an empty array", field);
    if (r->n > MF_SRV_EMBED_MAX_INPUTS)
        return mf_srv_fail(e, 400, "invalid_request_error", field, "'%s' has %d inputs; at most %d per request",
                           field, r->n, MF_SRV_EMBED_MAX_INPUTS);
    r->ids = calloc((size_t)r->n, sizeof *r->ids);
    r->n_ids = calloc((size_t)r->n, sizeof *r->n_ids);
    if (!r->ids || !r->n_ids) return mf_srv_fail(e, 500, "server_error", "", "out of memory");
    if (one) return cJSON_IsString(in) ? one_input(model, info.n_vocab, in, field, 0, r, e)
                                       : token_array(in, info.n_vocab, field, 0, &r->ids[0], &r->n_ids[0], e);
    int32_t i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, in) {
        if (one_input(model, info.n_vocab, v, field, i, r, e)) return -1;
        i++;
    }
    return 0;
}

/* 'dimensions': null, n_embd, or fewer where the model was trained to be shortened (0 in r->dims: all). */
static int dimensions(const mf_model *model, const mf_srv_embed_limits *lim, const cJSON *dim, mf_srv_embed_req *r,
                      mf_srv_err *e) {
    if (!dim || cJSON_IsNull(dim)) return 0;
    if (!cJSON_IsNumber(dim) || dim->valuedouble != floor(dim->valuedouble) || dim->valuedouble < 1 ||
        dim->valuedouble > 1 << 20)
        return mf_srv_fail(e, 400, "invalid_request_error", "dimensions", "'dimensions' must be a positive integer");
    mf_error err = {0};
    const int32_t d = (int32_t)dim->valuedouble;
    if (mf_embed_dims_check(model, lim->pooling, d, lim->matryoshka, &err))
        return mf_srv_fail(e, 400, "invalid_request_error", "dimensions", "'dimensions': %s", err.msg);
    r->dims = d;
    return 0;
}

/* A server pooling none answers every token's raw vector, on llama-server's route only, as llama-server does. */
static int per_token(const mf_model *model, const mf_srv_embed_limits *lim, bool oai, bool nrm_given,
                     mf_srv_embed_req *r, mf_srv_err *e) {
    mf_pooling pool;
    bool from_file;
    mf_error err = {0};
    if (mf_embed_pooling(model, lim->pooling, &pool, &from_file, &err) || pool != MF_POOLING_NONE) return 0;
    if (oai)
        return mf_srv_fail(e, 400, "invalid_request_error", "",
                           "this server pools none%s: every token gets its own vector, which OpenAI's shape cannot "
                           "hold; POST /embedding answers them (llama-server's shape), or restart with --pooling "
                           "mean|cls|last", from_file ? " (the model's pooling_type)" : " (--pooling none)");
    if (nrm_given && r->normalize != -1)
        return mf_srv_fail(e, 400, "invalid_request_error", "embd_normalize",
                           "'embd_normalize' %d: with pooling none the per-token vectors are raw, as llama-server's; "
                           "drop it or give -1", r->normalize);
    r->normalize = -1;
    return 0;
}

static int parse_fields(const mf_model *model, const mf_srv_embed_limits *lim, bool oai, const cJSON *o,
                        mf_srv_embed_req *r, mf_srv_err *e) {
    const int32_t n_ctx = lim->n_ctx;
    mf_model_info info;
    mf_model_get_info(model, &info);
    r->oai = oai;
    r->normalize = 2;
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(o, "input");
    const char *field = "input";
    if (!oai && !in) in = cJSON_GetObjectItemCaseSensitive(o, "content"), field = "content";
    if (!in) return mf_srv_fail(e, 400, "invalid_request_error", "input", "'%s' is required", oai ? "input" : "content");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(o, "encoding_format");
    if (fmt && !cJSON_IsNull(fmt)) {
        if (!cJSON_IsString(fmt) || (strcmp(fmt->valuestring, "float") && strcmp(fmt->valuestring, "base64")))
            return mf_srv_fail(e, 400, "invalid_request_error", "encoding_format",
                               "'encoding_format' must be \"float\" or \"base64\"");
        r->base64 = !strcmp(fmt->valuestring, "base64");
    }
    if (dimensions(model, lim, cJSON_GetObjectItemCaseSensitive(o, "dimensions"), r, e)) return -1;
    const cJSON *nrm = cJSON_GetObjectItemCaseSensitive(o, "embd_normalize");
    if (nrm && !cJSON_IsNull(nrm)) {
        if (oai || !cJSON_IsNumber(nrm) || nrm->valuedouble != floor(nrm->valuedouble) || nrm->valuedouble < -1 ||
            nrm->valuedouble > 64)
            return mf_srv_fail(e, 400, "invalid_request_error", "embd_normalize",
                               oai ? "'embd_normalize' belongs to /embedding (OpenAI's vectors are always L2-normalised)"
                                   : "'embd_normalize' must be an integer in -1..64 (-1 none, 0 max-abs, 1 taxicab, "
                                     "2 Euclidean, p > 2 the p-norm)");
        r->normalize = (int)nrm->valuedouble;
    }
    if (per_token(model, lim, oai, nrm && !cJSON_IsNull(nrm), r, e)) return -1;
    if (inputs(model, in, field, r, e)) return -1;
    for (int32_t i = 0; i < r->n; i++) {
        if (r->n_ids[i] > n_ctx)
            return mf_srv_fail(e, 400, "invalid_request_error", field,
                               "'%s[%d]' has %d tokens and the server's context holds %d (shorten it, or restart with a "
                               "larger -c/--ctx-size)", field, i, r->n_ids[i], n_ctx);
        r->n_tokens += r->n_ids[i];
    }
    return 0;
}

cJSON *mf_srv_embed_body(const char *body, size_t len, mf_srv_err *e) {
    if (!mf_srv_utf8_valid(body, len)) {
        mf_srv_fail(e, 400, "invalid_request_error", "", "the request body is not valid UTF-8");
        return NULL;
    }
    cJSON *o = memchr(body, 0, len) ? NULL : cJSON_ParseWithLength(body, len);
    if (cJSON_IsObject(o)) return o;
    cJSON_Delete(o);
    mf_srv_fail(e, 400, "invalid_request_error", "", "the request body must be a JSON object");
    return NULL;
}

int mf_srv_embed_parse(const mf_model *model, const mf_srv_embed_limits *lim, bool oai, const char *body,
                       size_t len, mf_srv_embed_req *out, mf_srv_err *e) {
    memset(out, 0, sizeof *out);
    cJSON *o = mf_srv_embed_body(body, len, e);
    if (!o) return -1;
    int rc = parse_fields(model, lim, oai, o, out, e);
    cJSON_Delete(o);
    if (rc) mf_srv_embed_req_free(out);
    return rc;
}

/* ---------------- the answer ---------------- */

static bool add_str(mf_srv_buf *b, const char *s) { return mf_srv_buf_add(b, s, strlen(s)); }

static bool add_floats(mf_srv_buf *b, const float *v, int32_t n) {
    char num[32];
    bool ok = add_str(b, "[");
    for (int32_t i = 0; ok && i < n; i++) {
        snprintf(num, sizeof num, i ? ",%.9g" : "%.9g", (double)v[i]);
        ok = add_str(b, num);
    }
    return ok && add_str(b, "]");
}

/* OpenAI's base64 form: the vector's float32s, little-endian, base64 with padding. */
static bool add_base64(mf_srv_buf *b, const float *v, int32_t n) {
    static const char k[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const size_t nb = sizeof(float) * (size_t)n;
    unsigned char *p = malloc(nb);
    char *out = malloc((nb + 2) / 3 * 4 + 3);
    bool ok = p && out;
    if (ok) {
        for (int32_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, &v[i], 4);
            for (int s = 0; s < 4; s++) p[4 * (size_t)i + (size_t)s] = (unsigned char)(u >> (8 * s));
        }
        size_t o = 0;
        out[o++] = '"';
        for (size_t i = 0; i < nb; i += 3) {
            uint32_t t = (uint32_t)p[i] << 16 | (i + 1 < nb ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < nb ? p[i + 2] : 0);
            out[o++] = k[t >> 18 & 63];
            out[o++] = k[t >> 12 & 63];
            out[o++] = i + 1 < nb ? k[t >> 6 & 63] : '=';
            out[o++] = i + 2 < nb ? k[t & 63] : '=';
        }
        out[o++] = '"';
        ok = mf_srv_buf_add(b, out, o);
    }
    free(p);
    free(out);
    return ok;
}

static bool add_entry(mf_srv_buf *b, const mf_srv_embed_req *r, int32_t i, const float *v, int32_t n) {
    char head[64];
    if (r->oai) snprintf(head, sizeof head, "%s{\"object\":\"embedding\",\"index\":%d,\"embedding\":", i ? "," : "", i);
    else snprintf(head, sizeof head, "%s{\"index\":%d,\"embedding\":[", i ? "," : "", i); /* native: [[...]] */
    bool ok = add_str(b, head) && (r->base64 ? add_base64(b, v, n) : add_floats(b, v, n));
    return ok && add_str(b, r->oai ? "}" : "]}");
}

bool mf_srv_buf_add_json_str(mf_srv_buf *b, const char *s) {
    cJSON *j = cJSON_CreateString(s);
    char *t = j ? cJSON_PrintUnformatted(j) : NULL;
    bool ok = t && add_str(b, t);
    cJSON_free(t);
    cJSON_Delete(j);
    return ok;
}

static bool add_tail(mf_srv_buf *b, const mf_srv_embed_req *r, const char *model_name) {
    if (!r->oai) return add_str(b, "]");
    char usage[128];
    snprintf(usage, sizeof usage, ",\"usage\":{\"prompt_tokens\":%d,\"total_tokens\":%d}}", r->n_tokens, r->n_tokens);
    return add_str(b, "],\"model\":") && mf_srv_buf_add_json_str(b, model_name) && add_str(b, usage);
}

/* A failed call's verdict on part q's inputs a..b. */
static void fail_part(mf_srv_pooled *q, int rc, const char *what, const char *param, int32_t a, int32_t b,
                      const char *why) {
    q->status = rc == MF_E_NOMEM || rc == MF_E_FORMAT ? 500 : 400;
    if (!param) param = q->req->oai ? "input" : "";
    mf_srv_fail(&q->err, q->status, q->status == 400 ? "invalid_request_error" : "server_error", param,
                "%s %d..%d: %s", what, a, b, why);
}

/* Hands the group's vectors (v, in group order) to each part's run; when the shared call failed (rc), each
 * part of a group of several runs again alone, so that only the request with the bad input fails. */
static void deliver(mf_context *ctx, mf_seq_id seq, mf_pooling pooling, mf_srv_pooled *p, const int *owner,
                    const int32_t *local, const mf_token *const *ids, const int32_t *lens, int32_t k, int rc,
                    const mf_error *err, float *v, int32_t dim, const char *what, const char *param) {
    const bool mixed = owner[0] != owner[k - 1];
    for (int32_t s = 0, t; s < k; s = t) {
        mf_srv_pooled *q = &p[owner[s]];
        for (t = s; t < k && owner[t] == owner[s]; t++) {}
        float *vs = v + (size_t)s * (size_t)dim;
        int rq = rc;
        mf_error eq = *err;
        if (rc && mixed) rq = mf_embed_batch(ctx, seq, ids + s, lens + s, t - s, pooling, vs, &eq);
        if (rq) fail_part(q, rq, what, param, local[s], local[t - 1], eq.msg);
        else if (!q->take(q->arg, local[s], t - s, vs, dim)) q->status = 500;
    }
}

void mf_srv_embed_groups(mf_context *ctx, mf_seq_id seq, mf_pooling pooling, mf_srv_pooled *p, int n,
                         const char *what, const char *param) {
    enum { G = MF_SRV_EMBED_GROUP };
    const int32_t dim = mf_embed_size(ctx);
    float *v = malloc(sizeof(float) * (size_t)dim * G);
    const mf_token *ids[G];
    int32_t lens[G], local[G];
    int owner[G];
    int pi = 0;
    int32_t ii = 0; /* the next input: p[pi]'s input ii */
    for (;;) {
        /* a client that went away is noticed between groups; its inputs are dropped from the rest */
        for (int q = 0; q < n; q++)
            if (p[q].status == 200 && p[q].cancelled && p[q].cancelled(p[q].user)) p[q].status = 499;
        int32_t k = 0;
        while (k < G && pi < n) {
            if (p[pi].status != 200 || ii >= p[pi].req->n) {
                pi++, ii = 0;
                continue;
            }
            ids[k] = p[pi].req->ids[ii], lens[k] = p[pi].req->n_ids[ii], owner[k] = pi, local[k] = ii++;
            k++;
        }
        if (k == 0) break;
        if (!v) {
            for (int32_t s = 0; s < k; s++) p[owner[s]].status = 500;
            continue;
        }
        mf_error err = {0};
        const int rc = mf_embed_batch(ctx, seq, ids, lens, k, pooling, v, &err);
        deliver(ctx, seq, pooling, p, owner, local, ids, lens, k, rc, &err, v, dim, what, param);
    }
    free(v);
}

int mf_srv_embed_answer(int status, mf_srv_buf *b, char **body, mf_srv_err *e) {
    *body = NULL;
    if (status == 200 && !mf_srv_buf_add(b, "", 1)) status = 500;
    if (status == 500 && !e->msg[0]) mf_srv_fail(e, 500, "server_error", "", "out of memory building the answer");
    if (status != 200) {
        mf_srv_buf_free(b);
        return status;
    }
    *body = b->s;
    return 200;
}

typedef struct {
    mf_srv_buf *b;
    const mf_srv_embed_req *r;
} embed_out;

/* A group's vectors, shortened to 'dimensions' before they are normalised (Matryoshka), into the answer. */
static bool write_group(void *arg, int32_t g0, int32_t k, float *v, int32_t dim) {
    const embed_out *o = arg;
    const int32_t n = o->r->dims ? o->r->dims : dim;
    bool ok = true;
    for (int32_t i = 0; ok && i < k; i++) {
        float *vi = v + (size_t)i * (size_t)dim;
        mf_embed_normalize(vi, n, o->r->normalize);
        ok = add_entry(o->b, o->r, g0 + i, vi, n);
    }
    return ok;
}

/* Pooling none: input i's rows (n_ids[i] vectors of dim floats) as one native entry, [[...], ...]. */
static bool add_token_rows(mf_srv_buf *b, int32_t i, const float *rows, int32_t n_rows, int32_t dim) {
    char head[48];
    snprintf(head, sizeof head, "%s{\"index\":%d,\"embedding\":[", i ? "," : "", i);
    bool ok = add_str(b, head);
    for (int32_t r = 0; ok && r < n_rows; r++)
        ok = (!r || add_str(b, ",")) && add_floats(b, rows + (size_t)r * (size_t)dim, dim);
    return ok && add_str(b, "]}");
}

/* Pooling none: each input of each request alone through mf_embed_tokens (a client that left is noticed
 * between inputs), into llama-server's native shape. */
static void run_per_token(mf_context *ctx, mf_seq_id seq, mf_srv_pooled *p, int n) {
    const int32_t dim = mf_embed_size(ctx);
    for (int q = 0; q < n; q++) {
        const mf_srv_embed_req *r = p[q].req;
        mf_srv_buf b = {0};
        p[q].status = add_str(&b, "[") ? 200 : 500;
        for (int32_t i = 0; p[q].status == 200 && i < r->n; i++) {
            if (p[q].cancelled && p[q].cancelled(p[q].user)) {
                p[q].status = 499;
                break;
            }
            float *rows = malloc(sizeof(float) * (size_t)dim * (size_t)r->n_ids[i]);
            mf_error err = {0};
            const int rc = rows ? mf_embed_tokens(ctx, seq, r->ids[i], r->n_ids[i], rows, &err) : MF_E_NOMEM;
            if (rc) fail_part(&p[q], rc, "inputs", "", i, i, rows ? err.msg : "out of memory");
            else if (!add_token_rows(&b, i, rows, r->n_ids[i], dim)) p[q].status = 500;
            free(rows);
        }
        if (p[q].status == 200 && !add_str(&b, "]")) p[q].status = 500;
        p[q].status = mf_srv_embed_answer(p[q].status, &b, &p[q].body, &p[q].err);
    }
}

void mf_srv_embed_run(mf_context *ctx, mf_seq_id seq, mf_pooling pooling, mf_srv_pooled *p, int n,
                      const char *model_name) {
    if (pooling == MF_POOLING_NONE) {
        run_per_token(ctx, seq, p, n);
        return;
    }
    mf_srv_buf *b = calloc((size_t)n, sizeof *b);
    embed_out *o = calloc((size_t)n, sizeof *o);
    for (int i = 0; i < n; i++) {
        p[i].status = b && o && add_str(&b[i], p[i].req->oai ? "{\"object\":\"list\",\"data\":[" : "[") ? 200 : 500;
        if (o) o[i] = (embed_out){&b[i], p[i].req};
        p[i].take = write_group, p[i].arg = o ? &o[i] : NULL;
    }
    mf_srv_embed_groups(ctx, seq, pooling, p, n, "inputs", NULL);
    for (int i = 0; i < n; i++) {
        if (p[i].status == 200 && !add_tail(&b[i], p[i].req, model_name)) p[i].status = 500;
        if (b) p[i].status = mf_srv_embed_answer(p[i].status, &b[i], &p[i].body, &p[i].err);
        else mf_srv_fail(&p[i].err, 500, "server_error", "", "out of memory");
    }
    free(b);
    free(o);
}
