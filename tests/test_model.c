/* Model loading (src/model) through the public API, on tiny qwen2 files written here with the GGUF
 * writer (1 layer, n_embd 8, a 300-token byte-level vocabulary):
 *   a token_embd / output row count that disagrees with the vocabulary names the tensor at fault and
 *   both numbers; a tokenizer that cannot be built leaves a loadable model whose refusal to tokenize
 *   states the real reason; running out of memory anywhere in a load is reported as out of memory
 *   (every allocation made to fail in turn through the linker's --wrap, see the Makefile); the copy of the
 *   weights at load on several threads makes the copies the whole-matrix repack makes (generated tiny
 *   files), and moves the others into huge pages only where the kernel has them. */
#include "harness.h"

#include "minfer.h"

#include "core/core.h"
#include "backend/registry.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "quant/quant.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- allocation failure injection: the k-th malloc/calloc/realloc after arming returns NULL ---- */
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
static long g_fail_at = 0, g_allocs = 0; /* g_fail_at 0 = disarmed */
static bool g_failed;

static bool fail_now(void) {
    if (!g_fail_at) return false;
    if (++g_allocs != g_fail_at) return false;
    g_failed = true;
    return true;
}
void *__wrap_malloc(size_t n) { return fail_now() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) { return fail_now() ? NULL : __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t n) { return fail_now() ? NULL : __real_realloc(p, n); }

/* ---- tiny files ---- */
#define N_EMBD 8
#define N_FF 16
#define N_VOCAB 300 /* 256 byte tokens, "ab", <|endoftext|>, <|im_end|>, pads */

typedef struct {
    int64_t embd_rows;   /* token_embd rows */
    int64_t output_rows; /* output.weight rows; 0 = tied (no output.weight) */
    bool tokenizer;      /* write tokenizer.ggml.* (N_VOCAB tokens) */
    const char *pre;     /* tokenizer.ggml.pre */
} spec;

static void byte_text(int b, char *out) {
    /* GPT-2's bytes_to_unicode: printable bytes stand for themselves, the other 68 map to U+0100.. */
    bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    unsigned cp = printable ? (unsigned)b : b <= 32 ? 256u + (unsigned)b : b <= 160 ? 256u + 33u + (unsigned)(b - 127) : 256u + 67u;
    if (cp < 0x80) {
        out[0] = (char)cp, out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cp >> 6)), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
    }
}

static bool add_f32(mf_gguf_writer *w, const char *name, int64_t ne0, int64_t ne1, mf_error *err) {
    int64_t ne[2] = {ne0, ne1};
    return mf_gguf_writer_add_tensor(w, name, MF_TYPE_F32, ne1 ? 2 : 1, ne, err) == 0;
}

static bool write_model(const char *path, const spec *s, mf_error *err) {
    mf_gguf_writer *w = mf_gguf_writer_new();
    if (!w) return false;
    mf_gguf_writer_set_str(w, "general.architecture", "qwen2");
    mf_gguf_writer_set_u32(w, "qwen2.context_length", 64);
    mf_gguf_writer_set_u32(w, "qwen2.embedding_length", N_EMBD);
    mf_gguf_writer_set_u32(w, "qwen2.block_count", 1);
    mf_gguf_writer_set_u32(w, "qwen2.feed_forward_length", N_FF);
    mf_gguf_writer_set_u32(w, "qwen2.attention.head_count", 2);
    mf_gguf_writer_set_u32(w, "qwen2.attention.head_count_kv", 1);
    mf_gguf_writer_set_f32(w, "qwen2.attention.layer_norm_rms_epsilon", 1e-6f);
    char texts[N_VOCAB][16];
    const char *tokens[N_VOCAB];
    int32_t types[N_VOCAB];
    for (int i = 0; i < N_VOCAB; i++) {
        if (i < 256)
            byte_text(i, texts[i]);
        else
            snprintf(texts[i], sizeof texts[i], "[PAD%d]", i);
        types[i] = 1;
    }
    snprintf(texts[256], sizeof texts[256], "ab");
    snprintf(texts[257], sizeof texts[257], "<|endoftext|>");
    snprintf(texts[258], sizeof texts[258], "<|im_end|>");
    types[257] = types[258] = 3;
    for (int i = 0; i < N_VOCAB; i++) tokens[i] = texts[i];
    const char *merges[] = {"a b"};
    if (s->tokenizer) {
        mf_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
        mf_gguf_writer_set_str(w, "tokenizer.ggml.pre", s->pre ? s->pre : "qwen2");
        mf_gguf_writer_set_str_arr(w, "tokenizer.ggml.tokens", tokens, N_VOCAB);
        mf_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", MF_GGUF_INT32, types, N_VOCAB);
        mf_gguf_writer_set_str_arr(w, "tokenizer.ggml.merges", merges, 1);
        mf_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 258);
    }
    bool ok = add_f32(w, "token_embd.weight", N_EMBD, s->embd_rows, err) &&
              add_f32(w, "output_norm.weight", N_EMBD, 0, err) &&
              (!s->output_rows || add_f32(w, "output.weight", N_EMBD, s->output_rows, err)) &&
              add_f32(w, "blk.0.attn_norm.weight", N_EMBD, 0, err) && add_f32(w, "blk.0.attn_q.weight", N_EMBD, 8, err) &&
              add_f32(w, "blk.0.attn_k.weight", N_EMBD, 4, err) && add_f32(w, "blk.0.attn_v.weight", N_EMBD, 4, err) &&
              add_f32(w, "blk.0.attn_output.weight", 8, N_EMBD, err) && add_f32(w, "blk.0.ffn_norm.weight", N_EMBD, 0, err) &&
              add_f32(w, "blk.0.ffn_gate.weight", N_EMBD, N_FF, err) && add_f32(w, "blk.0.ffn_up.weight", N_EMBD, N_FF, err) &&
              add_f32(w, "blk.0.ffn_down.weight", N_FF, N_EMBD, err);
    /* tensor sizes in declaration order; zeros are a valid (if dull) model */
    const int64_t sizes[] = {N_EMBD * s->embd_rows, N_EMBD, N_EMBD * s->output_rows, N_EMBD, N_EMBD * 8, N_EMBD * 4,
                             N_EMBD * 4, 8 * N_EMBD, N_EMBD, N_EMBD * N_FF, N_EMBD * N_FF, N_FF * N_EMBD};
    float *zeros = calloc((size_t)N_EMBD * (size_t)(s->embd_rows > N_VOCAB ? s->embd_rows : N_VOCAB) + 1024, sizeof(float));
    ok = ok && zeros && mf_gguf_writer_begin(w, path, err) == 0;
    for (size_t i = 0; ok && i < sizeof sizes / sizeof sizes[0]; i++) {
        if (i == 2 && !s->output_rows) continue;
        ok = mf_gguf_writer_write_tensor(w, zeros, (uint64_t)sizes[i] * sizeof(float), err) == 0;
    }
    ok = ok && mf_gguf_writer_end(w, err) == 0;
    free(zeros);
    mf_gguf_writer_free(w);
    return ok;
}

static char g_path[512];

static int load(const spec *s, mf_model **m, mf_error *err) {
    *m = NULL;
    if (!write_model(g_path, s, err)) {
        printf("  writing %s failed: %s\n", g_path, err->msg);
        return -100;
    }
    return mf_model_load(g_path, NULL, m, err);
}

static void test_a_wrong_token_embd_row_count_names_token_embd(void) {
    mf_model *m = NULL;
    mf_error err = {0};
    /* untied: output.weight has the right count, so only token_embd is at fault */
    spec s = {.embd_rows = 290, .output_rows = N_VOCAB, .tokenizer = true};
    CHECK(load(&s, &m, &err) == MF_E_FORMAT && !m, "loaded");
    CHECK(strstr(err.msg, "tensor 'token_embd.weight' has 290 rows, but the vocabulary has 300 tokens "
                          "(tokenizer.ggml.tokens)") &&
              !strstr(err.msg, "output.weight") && strstr(err.msg, "cannot load model"),
          "msg: %s", err.msg);
    /* tied: no output.weight; used to load with a warning and tokens 290..299 outside the embedding */
    s.output_rows = 0;
    CHECK(load(&s, &m, &err) == MF_E_FORMAT && !m, "tied loaded");
    CHECK(strstr(err.msg, "tensor 'token_embd.weight' has 290 rows, but the vocabulary has 300 tokens"), "msg: %s",
          err.msg);
    /* the output at fault */
    s = (spec){.embd_rows = N_VOCAB, .output_rows = 310, .tokenizer = true};
    CHECK(load(&s, &m, &err) == MF_E_FORMAT && !m, "bad output loaded");
    CHECK(strstr(err.msg, "tensor 'output.weight' has 310 rows, but the vocabulary has 300 tokens") &&
              !strstr(err.msg, "token_embd"),
          "msg: %s", err.msg);
    /* no tokenizer to tell which one is wrong: both are named */
    s = (spec){.embd_rows = N_VOCAB, .output_rows = 310, .tokenizer = false};
    CHECK(load(&s, &m, &err) == MF_E_FORMAT && !m, "mismatch without tokenizer loaded");
    CHECK(strstr(err.msg, "tensor 'output.weight' has 310 rows but 'token_embd.weight' has 300"), "msg: %s", err.msg);
    mf_model_free(m);
}

static void test_a_model_without_a_usable_tokenizer_says_why(void) {
    mf_model *m = NULL;
    mf_error err = {0};
    mf_token *ids = NULL;
    int32_t n = 0;
    spec s = {.embd_rows = N_VOCAB, .output_rows = N_VOCAB, .tokenizer = true, .pre = "llama-bpe"};
    REQUIRE(load(&s, &m, &err) == 0, "a broken tokenizer must not stop the load: %s", err.msg);
    CHECK(mf_tokenize(m, "ab", 2, false, false, &ids, &n, &err) == MF_E_UNSUPPORTED, "tokenized");
    CHECK(strstr(err.msg, "has no usable tokenizer: tokenizer pre-tokenizer 'llama-bpe' is not supported") &&
              strstr(err.msg, "give token ids instead (--tokens)") && !strstr(err.msg, "see the warning"),
          "msg: %s", err.msg);
    char *text = NULL;
    size_t len = 0;
    CHECK(mf_detokenize(m, (mf_token[]){1}, 1, &text, &len, &err) == MF_E_UNSUPPORTED &&
              strstr(err.msg, "'llama-bpe' is not supported"),
          "detokenize: %s", err.msg);
    mf_model_free(m);

    s = (spec){.embd_rows = N_VOCAB, .output_rows = N_VOCAB, .tokenizer = false};
    REQUIRE(load(&s, &m, &err) == 0, "%s", err.msg);
    CHECK(mf_tokenize(m, "ab", 2, false, false, &ids, &n, &err) == MF_E_UNSUPPORTED, "tokenized without a tokenizer");
    CHECK(strstr(err.msg, "has no usable tokenizer: the file has no tokenizer (no tokenizer.ggml.tokens metadata); "
                          "give token ids instead (--tokens)"),
          "msg: %s", err.msg);
    mf_model_free(m);

    /* the control: the same file with a good tokenizer tokenizes, and its eog list is the model's */
    s.tokenizer = true;
    REQUIRE(load(&s, &m, &err) == 0, "%s", err.msg);
    REQUIRE(mf_tokenize(m, "ab", 2, false, false, &ids, &n, &err) == 0, "%s", err.msg);
    CHECK(n == 1 && ids[0] == 256, "'ab' -> %d ids, first %d", n, n ? ids[0] : -1);
    free(ids);
    mf_model_info info;
    mf_model_get_info(m, &info);
    CHECK(info.n_vocab == N_VOCAB && info.eos == 258 && info.n_eog == 2 && info.eog[0] == 258 && info.eog[1] == 257,
          "vocab %d eos %d eog %d ids", info.n_vocab, info.eos, info.n_eog);
    mf_model_free(m);
}

static void test_out_of_memory_while_loading_is_reported_as_such(void) {
    spec s = {.embd_rows = N_VOCAB, .output_rows = N_VOCAB, .tokenizer = true};
    mf_error err = {0};
    REQUIRE(write_model(g_path, &s, &err), "%s", err.msg);
    int n_nomem = 0, n_bad = 0;
    long k;
    for (k = 1; k < 100000; k++) {
        mf_model *m = NULL;
        g_allocs = 0;
        g_failed = false;
        g_fail_at = k;
        int rc = mf_model_load(g_path, NULL, &m, &err);
        g_fail_at = 0;
        if (!g_failed) { /* every allocation of a load was failed once */
            CHECK(rc == 0, "the unhindered load failed: %s", err.msg);
            mf_model_free(m);
            break;
        }
        if (rc) {
            n_nomem++;
            if ((rc != MF_E_NOMEM || !strstr(err.msg, "out of memory")) && n_bad++ < 5)
                CHECK(false, "allocation %ld failed: rc %d (%s), msg: %s", k, rc, mf_err_code_name(rc), err.msg);
            continue;
        }
        /* a load that survived the failure must have everything: above all the tokenizer */
        mf_token *ids = NULL;
        int32_t n = 0;
        rc = mf_tokenize(m, "ab", 2, false, false, &ids, &n, &err);
        if (rc && n_bad++ < 5) CHECK(false, "allocation %ld failed, the load succeeded without a tokenizer: %s", k, err.msg);
        free(ids);
        mf_model_free(m);
    }
    printf("  %ld allocations in a load, each failed once: %d loads refused as out of memory\n", k - 1, n_nomem);
    CHECK(k > 10 && n_nomem > 10, "the injection did not reach the load (%ld allocations)", k - 1);
}

/* The repacked weights' buffer (mf_huge_alloc): 2 MiB aligned and advised for transparent huge pages (the
 * VMA's "hg" flag in /proc/self/smaps), which cut a 500 MiB repack's page faults 512-fold and made decode
 * read faster (docs/PERFORMANCE.md); whether the kernel then backs it with huge pages is its own choice. */
static void test_huge_alloc_is_aligned_and_advised_for_huge_pages(void) {
    const size_t size = (size_t)5 << 20;
    uint8_t *p = mf_huge_alloc(size);
    REQUIRE(p, "mf_huge_alloc(%zu) failed", size);
    memset(p, 1, size);
    CHECK((uintptr_t)p % ((size_t)2 << 20) == 0, "%p is not 2 MiB aligned", (void *)p);
    const char *unseen = mf_test_vm_flags_unseen();
    char flags[512] = "";
    const bool found = !unseen && mf_test_vm_flags(p, flags, sizeof flags);
    mf_aligned_free(p);
    if (unseen) SKIP("%s", unseen);
    CHECK(found, "no mapping in /proc/self/smaps holds %p", (void *)p);
    CHECK(strstr(flags, " hg") != NULL, "the buffer's mapping is not advised for huge pages: VmFlags:%s", flags);
}

/* The copy at load cuts the matrices into items of whole row groups that several threads take in turn;
 * every copy must be byte for byte the one-call repack of the whole original, or the original itself for a
 * type with no layout of its own (a wrong item offset, a lost last item or a row group split between items
 * would each show), for one thread and for more threads than this machine has cores.  Generated tiny
 * files: q8_0 (x16 or x8 layouts), Q4_K_M (q4_K, q6_K) and f16 (moved into huge pages where the kernel
 * has them, as they are); each untied LM head (151936 rows) spans many items. */
static void test_copies_at_load_on_threads_equal_the_whole_matrix(void) {
    const char *types[] = {"q8_0", "q4_k_m", "f16"};
    const bool huge = mf_huge_pages_advisable();
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        char path[512], cmd[1024];
        snprintf(path, sizeof path, "%s/model-repack-%s.gguf", mf_test_tmpdir(), types[ti]);
        snprintf(cmd, sizeof cmd, "%s --arch qwen2 --type %s -o %s", mf_test_genmodel(), types[ti], path);
        REQUIRE(system(cmd) == 0, "%s failed", cmd);
        mf_error err = {0};
        mf_model *ref = NULL;
        const mf_model_open_params in_place = {.repack = false};
        REQUIRE(!mf_model_open(path, &in_place, &ref, &err), "%s: %s", path, err.msg);
        const int threads[] = {1, 3};
        for (size_t k = 0; k < 2; k++) {
            mf_model *m = NULL;
            const mf_model_open_params op = {.repack = true, .n_threads = threads[k]};
            REQUIRE(!mf_model_open(path, &op, &m, &err), "%s: %s", path, err.msg);
            int n_same = 0, n_large = 0, n_layout = 0;
            for (int i = 0; i < m->n_copies; i++) {
                const mf_gguf_tensor *c = &m->copies[i];
                char name[128];
                snprintf(name, sizeof name, "%.*s", (int)c->name.len, c->name.ptr);
                const mf_gguf_tensor *t = mf_gguf_find_tensor(ref->gguf, name);
                REQUIRE(t && t->nbytes == c->nbytes, "%s: no original of the same size", name);
                /* the CPU's layout for it: x8/x16 where its kernels have one (x86-64), else its own type */
                const uint32_t lay = mf_backend_weight_layout(MF_BACKEND_CPU, t->type, t->ne[0], t->ne[1]);
                CHECK(c->type == lay, "%s: copied as type %u, the CPU's layout is %u", name, c->type, lay);
                n_layout += lay != t->type;
                void *want = malloc((size_t)t->nbytes);
                REQUIRE(want, "out of memory");
                if (c->type == t->type)
                    memcpy(want, t->data, (size_t)t->nbytes);
                else
                    CHECK(!mf_repack_as(c->type, t->type, t->data, want, t->ne[0], t->ne[1]), "%s: repack failed", name);
                if (!memcmp(want, c->data, (size_t)t->nbytes))
                    n_same++;
                else
                    CHECK(false, "%s (%s, %d threads): the copy differs from the whole matrix's", name, types[ti],
                          threads[k]);
                n_large += t->nbytes > ((uint64_t)8 << 20);
                free(want);
            }
            printf("  %s, %d threads: %d of %d copies (%d repacked, %d moved) equal the whole matrix's (%d over 8 MiB)\n",
                   types[ti], threads[k], n_same, m->n_copies, m->n_repacked, m->n_moved, n_large);
            /* 2 layers x 7 matrices + the LM head: all copied where huge pages are advisable, else only those
             * with a layout of their own (none outside x86-64) */
            CHECK(m->n_repacked == n_layout && m->n_moved == m->n_copies - n_layout &&
                      m->n_copies == (huge ? 2 * 7 + 1 : n_layout),
                  "%s: %d repacked, %d moved of %d copies, %d with a layout (huge pages %s)", types[ti], m->n_repacked,
                  m->n_moved, m->n_copies, n_layout, huge ? "advisable" : "not advisable");
            CHECK(m->n_copies == 0 || n_large >= 1, "no copy spans several items");
            mf_model_close(m);
        }
        mf_model_close(ref);
        remove(path);
    }
}

/* Weights in their own type are moved into huge pages only where the kernel's transparent-huge-page mode
 * gives them (the copy would only cost load time otherwise). */
static void test_huge_pages_are_advisable_only_in_always_and_madvise_modes(void) {
    CHECK(mf_huge_pages_mode_advisable("always [madvise] never\n"), "madvise mode");
    CHECK(mf_huge_pages_mode_advisable("[always] madvise never\n"), "always mode");
    CHECK(!mf_huge_pages_mode_advisable("always madvise [never]\n"), "never mode");
    CHECK(!mf_huge_pages_mode_advisable(""), "no text");
    CHECK(!mf_huge_pages_mode_advisable(NULL), "no file");
}

int main(void) {
    snprintf(g_path, sizeof g_path, "%s/model-tiny.gguf", mf_test_tmpdir());
    mf_log_set_level(MF_LOG_ERROR); /* the broken-tokenizer warning is expected */
    RUN(test_a_wrong_token_embd_row_count_names_token_embd);
    RUN(test_a_model_without_a_usable_tokenizer_says_why);
    RUN(test_out_of_memory_while_loading_is_reported_as_such);
    RUN(test_huge_alloc_is_aligned_and_advised_for_huge_pages);
    RUN(test_copies_at_load_on_threads_equal_the_whole_matrix);
    RUN(test_huge_pages_are_advisable_only_in_always_and_madvise_modes);
    remove(g_path);
    return mf_test_done();
}
