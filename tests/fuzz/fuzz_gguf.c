/* libFuzzer harness: the GGUF reader and what reads a GGUF's metadata after it.
 *
 * The input is a whole file.  mf_gguf_open_memory validates it; when it accepts, every accessor is
 * exercised on every key and tensor (so an extent the validator let through that an accessor then
 * over-reads shows up under ASan), and the consumers that take hostile files run on it: the
 * hyper-parameter reader, the tokenizer loader (mf_tok_new on whatever vocabulary the file holds, then
 * a short encode / decode / streaming decode with it) and the model loader (weights bound, shape and
 * type checked, end-of-generation ids, then the x8 repack).
 *
 * Checked beyond "no sanitizer report": a tensor's bytes lie inside the input; kv_format's return
 * value is the length the full rendering needs (a second call with that capacity fits exactly). */
#include "fuzz.h"

#include "gguf/gguf.h"
#include "model/model.h"
#include "tok/tok.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    mf_log_set_level(MF_LOG_ERROR);
    return 0;
}

static volatile uint8_t g_sink;

static void touch(const void *p, uint64_t n) {
    if (!n) return;
    const uint8_t *b = p;
    g_sink ^= b[0];
    g_sink ^= b[n - 1];
}

static void exercise_kv(const mf_gguf *g, int64_t i) {
    mf_str key = mf_gguf_kv_key(g, i);
    touch(key.ptr, key.len);
    mf_gguf_type t = mf_gguf_kv_type(g, i);
    (void)mf_gguf_type_name(t);
    if (t == MF_GGUF_ARRAY) {
        (void)mf_gguf_type_name(mf_gguf_kv_arr_type(g, i));
        (void)mf_gguf_kv_arr_len(g, i);
    }
    uint64_t nb = 0;
    const void *v = mf_gguf_kv_data(g, i, &nb);
    if (v) touch(v, nb);

    char small[48], big[512];
    size_t need = mf_gguf_kv_format(g, i, 4, 16, small, sizeof small);
    FAIL_IF(strlen(small) >= sizeof small);
    size_t need2 = mf_gguf_kv_format(g, i, 4, 16, big, sizeof big);
    FAIL_IF(need2 != need);
    if (need < sizeof big) FAIL_IF(strlen(big) != need);
    (void)mf_gguf_kv_format(g, i, 0, 0, small, 1); /* unlimited rendering into one byte */
    FAIL_IF(small[0] != 0);

    /* every typed getter by this key: they refuse or convert, never read past the value */
    if (key.len >= 256 || memchr(key.ptr, 0, key.len)) return;
    char k[256];
    memcpy(k, key.ptr, key.len);
    k[key.len] = 0;
    mf_error err = {0};
    FAIL_IF(mf_gguf_find_key(g, k) < 0);
    uint32_t u32;
    int64_t i64;
    uint64_t u64, n;
    float f;
    bool b;
    mf_str s;
    (void)mf_gguf_get_u32(g, k, &u32, &err);
    (void)mf_gguf_get_i64(g, k, &i64, &err);
    (void)mf_gguf_get_u64(g, k, &u64, &err);
    (void)mf_gguf_get_f32(g, k, &f, &err);
    (void)mf_gguf_get_bool(g, k, &b, &err);
    if (!mf_gguf_get_str(g, k, &s, &err)) touch(s.ptr, s.len);
    mf_str *sa = NULL;
    if (!mf_gguf_get_str_array(g, k, &sa, &n, &err))
        for (uint64_t j = 0; j < n; j++) touch(sa[j].ptr, sa[j].len);
    free(sa);
    int32_t *ia = NULL;
    if (!mf_gguf_get_i32_array(g, k, &ia, &n, &err) && n) g_sink ^= (uint8_t)ia[n - 1];
    free(ia);
    float *fa = NULL;
    if (!mf_gguf_get_f32_array(g, k, &fa, &n, &err) && n) g_sink ^= (uint8_t)(fa[n - 1] > 0);
    free(fa);
}

static void exercise_tok(const mf_gguf *g) {
    mf_tok *t = NULL;
    mf_error err = {0};
    if (mf_tok_load_gguf(g, &t, &err)) return;
    static const char text[] = "Hello <|im_start|>user\n w\xc3\xb6rld <think> 123\xff\xfe \xf0\x9f\x98";
    mf_tok_ids ids = {0};
    (void)mf_tok_encode(t, text, sizeof text - 1, MF_TOK_PARSE_SPECIAL | MF_TOK_ADD_BOS, &ids, &err);
    (void)mf_tok_encode(t, text, sizeof text - 1, 0, &ids, &err);
    for (size_t i = 0; i < ids.n; i++) FAIL_IF(ids.ids[i] < 0 || ids.ids[i] >= mf_tok_n_vocab(t));
    char *out = NULL;
    size_t len = 0;
    if (!mf_tok_decode(t, ids.ids, ids.n, MF_TOK_DECODE_SPECIAL, &out, &len, &err)) FAIL_IF(strlen(out) > len);
    free(out);
    mf_tok_stream st;
    mf_tok_stream_init(&st, t, 0);
    const char *o;
    size_t ol;
    int32_t n_vocab = mf_tok_n_vocab(t);
    for (int32_t id = -1; id <= n_vocab && id < 600; id++) (void)mf_tok_stream_push(&st, id, &o, &ol, &err);
    (void)mf_tok_stream_flush(&st, &o, &ol, &err);
    mf_tok_stream_free(&st);
    for (int32_t id = -1; id <= n_vocab && id < 600; id++) {
        size_t pl;
        const char *p = mf_tok_piece(t, id, &pl);
        if (p) touch(p, pl);
        p = mf_tok_text(t, id, &pl);
        if (p) touch(p, pl);
        (void)mf_tok_type_of(t, id);
    }
    const char *tmpl = mf_tok_chat_template(t);
    mf_chat_format cf;
    if (tmpl) (void)mf_chat_detect(tmpl, strlen(tmpl), &cf, &err);
    free(ids.ids);
    mf_tok_free(t);
}

/* The model loader takes a path (it maps the file itself): the input goes to an anonymous memory file,
 * named through /proc, so no disk is touched.  The load includes the repack of the weights. */
static void exercise_model(const uint8_t *data, size_t size) {
    static int fd = -1;
    if (fd < 0 && (fd = memfd_create("fuzz_gguf", 0)) < 0) return;
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size) return;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    mf_model *m = NULL;
    mf_error err = {0};
    const mf_model_open_params op = {.repack = true}; /* the repack runs on every file the loader accepts */
    if (mf_model_open(path, &op, &m, &err)) {
        FAIL_IF(m != NULL || !err.msg[0]);
        return;
    }
    FAIL_IF(m->hp.n_embd_q != m->hp.head_dim * m->hp.n_head);
    for (int32_t id = -1; id <= m->hp.n_vocab && id < 64; id++) (void)mf_model_token_is_eog(m, id);
    mf_model_close(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mf_gguf *g = NULL;
    mf_error err = {0};
    if (mf_gguf_open_memory(data, size, &g, &err)) {
        FAIL_IF(g != NULL);
        FAIL_IF(err.msg[0] == 0); /* every refusal says why */
        return 0;
    }
    (void)mf_gguf_version(g);
    FAIL_IF(mf_gguf_file_size(g) != size);
    FAIL_IF(mf_gguf_data_offset(g) > size);
    uint64_t align = mf_gguf_alignment(g);
    FAIL_IF(align == 0);

    int64_t n_kv = mf_gguf_n_kv(g);
    for (int64_t i = 0; i < n_kv; i++) exercise_kv(g, i);

    int64_t n_t = mf_gguf_n_tensors(g);
    for (int64_t i = 0; i < n_t; i++) {
        const mf_gguf_tensor *t = mf_gguf_tensor_at(g, i);
        FAIL_IF(!t);
        const uint8_t *d = t->data;
        FAIL_IF(t->nbytes && (d < data || d + t->nbytes > data + size || t->nbytes > size));
        touch(t->data, t->nbytes);
        touch(t->name.ptr, t->name.len);
        if (t->name.len < 256 && !memchr(t->name.ptr, 0, t->name.len)) {
            char name[256];
            memcpy(name, t->name.ptr, t->name.len);
            name[t->name.len] = 0;
            FAIL_IF(mf_gguf_find_tensor(g, name) == NULL);
        }
    }

    FAIL_IF(mf_gguf_tensor_at(g, n_t) != NULL || mf_gguf_tensor_at(g, -1) != NULL);
    FAIL_IF(mf_gguf_kv_key(g, n_kv).len != 0 || mf_gguf_kv_type(g, -1) != MF_GGUF_TYPE_COUNT);

    mf_hparams hp;
    (void)mf_hparams_read(g, &hp, &err);
    exercise_tok(g);
    mf_gguf_close(g);
    exercise_model(data, size);
    return 0;
}
