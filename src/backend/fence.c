/* fence: --backend / MINFER_BACKENDS -> the process-wide allowed set, and its three refusals.
 * The request removes backends, never adds one; cpu is always allowed. */
#include "backend/registry.h"

#include <ctype.h>
#include <pthread.h>
#include <string.h>

/* Parse one csv value into `f`.  Returns the number of names found, or a negative error. */
static int parse_csv(const char *csv, mf_backend_filter *f, mf_error *err) {
    int found = 0;
    const char *p = csv ? csv : "";
    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *s = p;
        while (len && isspace((unsigned char)*s)) s++, len--;
        while (len && isspace((unsigned char)s[len - 1])) len--;
        if (len) {
            char word[64];
            if (len >= sizeof word)
                return mf_err(err, MF_E_NOTFOUND, "unknown backend '%.*s'; known backends are: cpu, metal, cuda",
                              (int)len, s);
            memcpy(word, s, len);
            word[len] = '\0';
            mf_backend b;
            int rc = mf_backend_parse(word, &b, err);
            if (rc) return rc;
            if (!mf_backend_compiled(b)) {
                const char *why = mf_backend_not_compiled_reason(b);
                return mf_err(err, MF_E_UNSUPPORTED, "backend '%s' is known but not compiled into this build: %s",
                              mf_backend_name(b), why ? why : "it is not registered");
            }
            f->requested[b.id] = true;
            found++;
        }
        if (!end) break;
        p = end + 1;
    }
    return found;
}

static bool blank(const char *s) {
    if (!s) return true;
    while (*s && isspace((unsigned char)*s)) s++;
    return *s == '\0';
}

int mf_backend_filter_parse(const char *const *values, int n_values, const char *env, mf_backend_filter *out,
                            mf_error *err) {
    mf_backend_filter f;
    memset(&f, 0, sizeof f);
    if (n_values > 0) {
        /* The flag wins: the environment is not even parsed when --backend was given. */
        for (int i = 0; i < n_values; i++) {
            int n = parse_csv(values[i], &f, err);
            if (n < 0) return n;
            if (n == 0)
                return mf_err(err, MF_E_INVAL,
                              "--backend needs a backend name (cpu, metal, cuda), got '%s'", values[i] ? values[i] : "");
        }
        f.named = true;
    } else if (!blank(env)) {
        int n = parse_csv(env, &f, err);
        if (n < 0) return n;
        if (n == 0)
            return mf_err(err, MF_E_INVAL, "MINFER_BACKENDS names no backend (cpu, metal, cuda): '%s'", env);
        f.named = true;
    }
    for (int id = 0; id < MF_BACKEND_SLOTS; id++) {
        mf_backend b = {(uint16_t)id};
        if (!mf_backend_compiled(b)) continue;
        f.allowed[id] = !f.named || f.requested[id] || id == MF_BACKEND_ID_CPU;
    }
    *out = f;
    return 0;
}

int mf_backend_filter_resolve(mf_backend_filter *f, mf_error *err) {
    /* Named backends first, in id order, so the refusal names the first one the machine cannot use. */
    for (int id = 0; id < MF_BACKEND_SLOTS; id++) {
        mf_backend b = {(uint16_t)id};
        if (!f->requested[id] || id == MF_BACKEND_ID_CPU) continue;
        const char *why = mf_backend_unavailable(b);
        if (why)
            return mf_err(err, MF_E_BACKEND,
                          "backend '%s' is compiled in but not available on this machine: %s", mf_backend_name(b),
                          why);
    }
    for (int id = 0; id < MF_BACKEND_SLOTS; id++) {
        mf_backend b = {(uint16_t)id};
        if (id == MF_BACKEND_ID_CPU) {
            f->allowed[id] = true;
            continue;
        }
        if (f->allowed[id] && !f->requested[id] && mf_backend_unavailable(b)) f->allowed[id] = false;
    }
    return 0;
}

static struct {
    pthread_mutex_t mu;
    bool installed, read;
    mf_backend_filter fence;
} g_fence = {.mu = PTHREAD_MUTEX_INITIALIZER};

int mf_backend_fence_install(const mf_backend_filter *f, mf_error *err) {
    pthread_mutex_lock(&g_fence.mu);
    int rc = 0;
    if (g_fence.installed || g_fence.read)
        rc = mf_err(err, MF_E_INVAL,
                    "the backend fence is set once, at startup, before anything reads it (it was already %s)",
                    g_fence.installed ? "installed" : "read");
    else {
        g_fence.fence = *f;
        g_fence.fence.allowed[MF_BACKEND_ID_CPU] = true;
        g_fence.installed = true;
    }
    pthread_mutex_unlock(&g_fence.mu);
    return rc;
}

const mf_backend_filter *mf_backend_fence(void) {
    pthread_mutex_lock(&g_fence.mu);
    if (!g_fence.installed && !g_fence.read) {
        /* Nothing installed (a library user or a test): every backend this build has and this machine
         * can use.  Parsing an empty request and resolving it cannot fail. */
        mf_backend_filter f;
        if (mf_backend_filter_parse(NULL, 0, NULL, &f, NULL) == 0 && mf_backend_filter_resolve(&f, NULL) == 0)
            g_fence.fence = f;
        else {
            memset(&g_fence.fence, 0, sizeof g_fence.fence);
            g_fence.fence.allowed[MF_BACKEND_ID_CPU] = true;
        }
    }
    g_fence.read = true;
    pthread_mutex_unlock(&g_fence.mu);
    return &g_fence.fence;
}

bool mf_backend_allowed(mf_backend b) { return b.id < MF_BACKEND_SLOTS && mf_backend_fence()->allowed[b.id]; }
