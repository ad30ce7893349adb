/* core: error messages, the log sink, aligned (and huge-page) allocation, the clock. */
#include "core/core.h"
#include "core/env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#include <sys/mman.h>

int mf_err(mf_error *err, int code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

int mf_err_prefix(mf_error *err, int code, const char *fmt, ...) {
    if (!err) return code;
    char prefix[512], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    /* prefix + ": " + old message, truncated to the buffer */
    size_t np = strlen(prefix), no = strlen(old), cap = sizeof err->msg - 1;
    if (np > cap) np = cap;
    memcpy(err->msg, prefix, np);
    size_t at = np;
    for (const char *sep = ": "; *sep && at < cap; sep++) err->msg[at++] = *sep;
    if (no > cap - at) no = cap - at;
    memcpy(err->msg + at, old, no);
    err->msg[at + no] = 0;
    err->code = code;
    return code;
}

const char *mf_err_code_name(int code) {
    switch (code) {
    case MF_OK: return "ok";
    case MF_E_IO: return "I/O error";
    case MF_E_FORMAT: return "format error";
    case MF_E_NOMEM: return "out of memory";
    case MF_E_INVAL: return "invalid argument";
    case MF_E_UNSUPPORTED: return "unsupported";
    case MF_E_RANGE: return "out of range";
    case MF_E_NOTFOUND: return "not found";
    case MF_E_TYPE: return "type mismatch";
    case MF_E_BACKEND: return "backend error";
    case MF_E_INTERNAL: return "internal error";
    }
    return "unknown error";
}

static int g_log_level = -1;

/* A bad MINFER_LOG leaves the default here (the log sink cannot fail); mf_model_load and the CLI refuse it. */
static mf_log_level log_level_from_env(void) {
    int w = MF_LOG_WARN;
    if (mf_env_word("MINFER_LOG", &w, NULL) || w < 0) return MF_LOG_WARN;
    return (mf_log_level)w;
}

mf_log_level mf_log_get_level(void) {
    if (g_log_level < 0) g_log_level = (int)log_level_from_env();
    return (mf_log_level)g_log_level;
}

void mf_log_set_level(mf_log_level level) { g_log_level = (int)level; }

void mf_log(mf_log_level level, const char *fmt, ...) {
    if ((int)level > (int)mf_log_get_level()) return;
    static const char *names[] = {"error", "warn", "info", "debug"};
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "minfer %s: %s\n", names[level], buf);
}

void *mf_aligned_alloc(size_t align, size_t size) {
    void *p = NULL;
    if (size == 0) size = align;
    if (posix_memalign(&p, align, size) != 0) return NULL;
    return p;
}

void mf_aligned_free(void *p) { free(p); }

/* Huge pages: one page fault per 2 MiB instead of per 4 KiB while the buffer is first written (a 500 MiB
 * repack took ~128 k faults, most of a model's load time in a VM), and one TLB entry per 2 MiB while the
 * weights stream through every token. */
#define MF_HUGE_PAGE ((size_t)2 << 20)
void *mf_huge_alloc(size_t size) {
    void *p = mf_aligned_alloc(MF_HUGE_PAGE, size);
#if defined(MADV_HUGEPAGE)
    const size_t whole = size / MF_HUGE_PAGE * MF_HUGE_PAGE;
    if (p && whole && madvise(p, whole, MADV_HUGEPAGE) != 0)
        mf_log(MF_LOG_DEBUG, "madvise(MADV_HUGEPAGE) on %zu bytes: %s (ordinary pages)", whole, strerror(errno));
#endif
    return p;
}

bool mf_huge_pages_mode_advisable(const char *mode) {
    return mode && (strstr(mode, "[always]") || strstr(mode, "[madvise]"));
}

bool mf_huge_pages_advisable(void) {
    char mode[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return false;
    const bool ok = fgets(mode, sizeof mode, f) != NULL;
    fclose(f);
    return ok && mf_huge_pages_mode_advisable(mode);
}

double mf_time_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
