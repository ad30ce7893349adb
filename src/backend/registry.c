/* registry: the fixed id space, names, the registered set and its orders.
 * The table is built once (pthread_once) and is read-only afterwards. */
#include "backend/registry.h"

#include "backend/backend_entries.h"

#include <ctype.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Names and spellings are unconditional: a compiled-out backend still resolves to its handle, so the
 * refusal can say "known but not compiled" instead of "unknown". */
static const char *const k_names[MF_N_KNOWN_BACKENDS] = {"cpu", "metal", "cuda"};
static const char *const k_debug[MF_N_KNOWN_BACKENDS] = {"CPU", "Metal", "Cuda"};
/* The pinned placement priorities (metal 300 > cuda 200 > cpu 100); a registered entry must carry the
 * same number (tests/test_registry.c pins both), this table answers for compiled-out names. */
static const uint16_t k_priority[MF_N_KNOWN_BACKENDS] = {100, 300, 200};
static const char *const k_not_compiled[MF_N_KNOWN_BACKENDS] = {
    NULL,
    "Metal is compiled only on macOS",
    "the CUDA backend is compiled only with make CUDA=1",
};

static struct {
    pthread_once_t once;
    bool built;
    const mf_backend_entry *slot[MF_BACKEND_SLOTS];
    mf_backend_entry test_entry;
    bool have_test;
} g_reg = {.once = PTHREAD_ONCE_INIT};

static void registry_build(void) {
    /* The only place a backend is introduced. */
    g_reg.slot[MF_BACKEND_ID_CPU] = mf_cpu_entry();
#if MF_CUDA
    g_reg.slot[MF_BACKEND_ID_CUDA] = mf_cuda_entry();
#endif
    /* Metal is a known name that is never compiled into this C port (no Metal code exists). */
    if (g_reg.have_test) g_reg.slot[MF_BACKEND_TEST_ID] = &g_reg.test_entry;
    g_reg.built = true;
}

static void registry_ensure(void) { pthread_once(&g_reg.once, registry_build); }

bool mf_backend_from_index(int index, mf_backend *out) {
    if (index < 0 || index >= MF_BACKEND_SLOTS) return false;
    out->id = (uint16_t)index;
    return true;
}

const char *mf_backend_name(mf_backend b) {
    if (b.id < MF_N_KNOWN_BACKENDS) return k_names[b.id];
    if (b.id == MF_BACKEND_TEST_ID) return "test";
    return "unknown";
}

const char *mf_backend_debug_name(mf_backend b) {
    if (b.id < MF_N_KNOWN_BACKENDS) return k_debug[b.id];
    if (b.id == MF_BACKEND_TEST_ID) return "Test";
    return "Unknown";
}

/* Case-insensitive compare of [s, s + n) with a lower-case NUL-terminated word. */
static bool word_eq(const char *s, size_t n, const char *word) {
    size_t wl = strlen(word);
    if (wl != n) return false;
    for (size_t i = 0; i < n; i++)
        if (tolower((unsigned char)s[i]) != word[i]) return false;
    return true;
}

/* Resolve the trimmed word [s, s + n). */
static int parse_word(const char *s, size_t n, mf_backend *out, mf_error *err) {
    for (int i = 0; i < MF_N_KNOWN_BACKENDS; i++)
        if (word_eq(s, n, k_names[i])) {
            out->id = (uint16_t)i;
            return 0;
        }
    registry_ensure();
    if (g_reg.slot[MF_BACKEND_TEST_ID] && word_eq(s, n, g_reg.slot[MF_BACKEND_TEST_ID]->name)) {
        out->id = MF_BACKEND_TEST_ID;
        return 0;
    }
    return mf_err(err, MF_E_NOTFOUND, "unknown backend '%.*s'; known backends are: cpu, metal, cuda", (int)n, s);
}

int mf_backend_parse(const char *name, mf_backend *out, mf_error *err) {
    if (!name) name = "";
    while (isspace((unsigned char)*name)) name++;
    size_t n = strlen(name);
    while (n && isspace((unsigned char)name[n - 1])) n--;
    return parse_word(name, n, out, err);
}

const mf_backend_entry *mf_backend_entry_get(mf_backend b) {
    if (b.id >= MF_BACKEND_SLOTS) return NULL;
    registry_ensure();
    return g_reg.slot[b.id];
}

bool mf_backend_compiled(mf_backend b) { return mf_backend_entry_get(b) != NULL; }

const char *mf_backend_not_compiled_reason(mf_backend b) {
    if (b.id >= MF_N_KNOWN_BACKENDS || mf_backend_compiled(b)) return NULL;
    return k_not_compiled[b.id];
}

int mf_backend_by_priority(const bool *allowed, mf_backend out[MF_BACKEND_SLOTS]) {
    registry_ensure();
    int n = 0;
    /* Insertion sort on (priority descending, id ascending): two entries never tie. */
    for (int id = 0; id < MF_BACKEND_SLOTS; id++) {
        const mf_backend_entry *e = g_reg.slot[id];
        if (!e || (allowed && !allowed[id])) continue;
        int j = n;
        while (j > 0) {
            const mf_backend_entry *p = g_reg.slot[out[j - 1].id];
            if (p->priority > e->priority || (p->priority == e->priority && out[j - 1].id < id)) break;
            out[j] = out[j - 1];
            j--;
        }
        out[j].id = (uint16_t)id;
        n++;
    }
    return n;
}

uint16_t mf_backend_priority(mf_backend b) {
    const mf_backend_entry *e = mf_backend_entry_get(b);
    if (e) return e->priority;
    return b.id < MF_N_KNOWN_BACKENDS ? k_priority[b.id] : 0;
}

bool mf_backend_reads_packed_kv(mf_backend b) {
    const mf_backend_entry *e = mf_backend_entry_get(b);
    return e && e->caps.reads_packed_kv;
}

const char *mf_backend_unavailable(mf_backend b) {
    const mf_backend_entry *e = mf_backend_entry_get(b);
    if (!e) {
        const char *why = mf_backend_not_compiled_reason(b);
        return why ? why : "no backend has this id";
    }
    return e->unavailable ? e->unavailable() : NULL;
}

int mf_backend_register_test(const mf_backend_entry *e, mf_error *err) {
    if (!e || e->handle.id != MF_BACKEND_TEST_ID)
        return mf_err(err, MF_E_INVAL, "a test backend must use id %d (got %d)", MF_BACKEND_TEST_ID,
                      e ? (int)e->handle.id : -1);
    if (g_reg.built || g_reg.have_test)
        return mf_err(err, MF_E_INVAL,
                      "the test backend must be registered once, before the registry is first used");
    g_reg.test_entry = *e;
    g_reg.have_test = true;
    return 0;
}

/* ---- memory ---- */

static const mf_backend_entry *mem_entry(mf_backend b, mf_error *err) {
    const mf_backend_entry *e = mf_backend_entry_get(b);
    if (!e || !e->buf_alloc || !e->buf_read || !e->buf_write) {
        mf_err(err, MF_E_BACKEND, "backend '%s' has no memory hooks (not in this build, or it owns no memory)",
               mf_backend_name(b));
        return NULL;
    }
    return e;
}

int mf_backend_alloc(mf_backend b, size_t size, void **addr, mf_error *err) {
    const mf_backend_entry *e = mem_entry(b, err);
    if (!e) return MF_E_BACKEND;
    int rc = e->buf_alloc(size, addr, err);
    return rc ? mf_err_prefix(err, rc, "allocating %zu bytes on %s", size, e->name) : 0;
}

void mf_backend_free(mf_backend b, void *addr) {
    const mf_backend_entry *e = mf_backend_entry_get(b);
    if (addr && e && e->buf_free) e->buf_free(addr);
}

bool mf_backend_is_host(mf_backend b) {
    const mf_backend_entry *e = mf_backend_entry_get(b);
    return e && e->buf_is_host;
}

int mf_backend_write(mf_backend b, void *addr, const void *src, size_t n, mf_error *err) {
    const mf_backend_entry *e = mem_entry(b, err);
    return e ? e->buf_write(addr, src, n, err) : MF_E_BACKEND;
}

int mf_backend_read(mf_backend b, const void *addr, void *dst, size_t n, mf_error *err) {
    const mf_backend_entry *e = mem_entry(b, err);
    return e ? e->buf_read(addr, dst, n, err) : MF_E_BACKEND;
}

int mf_backend_copy(mf_backend src, const void *src_addr, mf_backend dst, void *dst_addr, size_t n, mf_error *err) {
    const mf_backend_entry *es = mem_entry(src, err), *ed = es ? mem_entry(dst, err) : NULL;
    if (!es || !ed) return MF_E_BACKEND;
    if (n == 0) return 0;
    if (es->buf_is_host && ed->buf_is_host) {
        memmove(dst_addr, src_addr, n);
        return 0;
    }
    if (ed->buf_copy_from) {
        bool done = false;
        int rc = ed->buf_copy_from(src, src_addr, dst_addr, n, &done, err);
        if (rc || done) return rc;
    }
    if (es->buf_is_host) return ed->buf_write(dst_addr, src_addr, n, err);
    if (ed->buf_is_host) return es->buf_read(src_addr, dst_addr, n, err);
    void *tmp = malloc(n);
    if (!tmp) return mf_err(err, MF_E_NOMEM, "no %zu-byte host buffer to copy from %s to %s", n, es->name, ed->name);
    int rc = es->buf_read(src_addr, tmp, n, err);
    if (!rc) rc = ed->buf_write(dst_addr, tmp, n, err);
    free(tmp);
    return rc;
}

uint32_t mf_backend_weight_layout(mf_backend b, uint32_t type, int64_t K, int64_t N) {
    const mf_backend_entry *e = mf_backend_entry_get(b);
    return e && e->weight_layout ? e->weight_layout(type, K, N) : type;
}

void mf_backend_mem_info(mf_backend b, mf_mem_info *out) {
    memset(out, 0, sizeof *out);
    const mf_backend_entry *e = mf_backend_entry_get(b);
    if (e && e->mem_info) {
        e->mem_info(out);
        return;
    }
    out->outcome = MF_MEM_UNKNOWN;
    snprintf(out->why, sizeof out->why, "backend '%s' %s", mf_backend_name(b),
             e ? "has no memory query" : "is not in this build");
}
