/* core: errors, logging, allocation helpers shared by every module.
 *
 * Error convention (see shared DESIGN.md): a function that can fail returns int (0 = ok, negative
 * MF_E_* code) and takes `mf_error *err` last.  The message names the actual values and the way out.
 * `err` may be NULL when the caller only wants the code. */
#ifndef MF_CORE_H
#define MF_CORE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <string.h>

#include "minfer.h" /* mf_error, the MF_E_* codes, mf_err_code_name: defined once, in the public header */

/* Sets err (if non-NULL) and returns code, so `return mf_err(err, MF_E_FORMAT, "...", ...)` works. */
int mf_err(mf_error *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Prepends "prefix: " to the message of the failure `code` (context added on the way up) and returns code,
 * so `return mf_err_prefix(err, rc, "...")` works.  The code comes from the caller, not from err, because
 * err may be NULL (then only the code is returned). */
int mf_err_prefix(mf_error *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Logging: one sink (stderr by default), level from MINFER_LOG=error|warn|info|debug. */
typedef enum { MF_LOG_ERROR = 0, MF_LOG_WARN = 1, MF_LOG_INFO = 2, MF_LOG_DEBUG = 3 } mf_log_level;
void mf_log(mf_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void mf_log_set_level(mf_log_level level);
mf_log_level mf_log_get_level(void);

/* Allocation: plain wrappers so sanitizer builds see every allocation; aligned memory is freed with
 * mf_aligned_free.  Both return NULL on failure (callers report MF_E_NOMEM with the size). */
void *mf_aligned_alloc(size_t align, size_t size);
void mf_aligned_free(void *p);
/* A large buffer streamed through on every token (the repacked weights, the KV cache): 2 MiB aligned, and
 * the kernel is asked to back its whole 2 MiB pages with transparent huge pages (Linux MADV_HUGEPAGE; a
 * hint: where it is refused, ordinary pages).  Freed with mf_aligned_free. */
void *mf_huge_alloc(size_t size);
/* Whether the kernel backs such a buffer with huge pages at all: its transparent-huge-page mode
 * (/sys/kernel/mm/transparent_hugepage/enabled) is "always" or "madvise" - not "never", nor a kernel
 * without them.  The _mode form judges that file's text ("always [madvise] never"). */
bool mf_huge_pages_advisable(void);
bool mf_huge_pages_mode_advisable(const char *mode);

/* Overflow-checked arithmetic for sizes computed from untrusted input: return false on overflow. */
static inline bool mf_add_u64(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_add_overflow(a, b, out); }
static inline bool mf_mul_u64(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_mul_overflow(a, b, out); }

/* A float's bit pattern and back, without breaking aliasing rules (f16/bf16 conversion, the vector exp). */
static inline uint32_t mf_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float mf_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Monotonic clock in seconds. */
double mf_time_now(void);

#define MF_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define MF_MIN(a, b) ((a) < (b) ? (a) : (b))
#define MF_MAX(a, b) ((a) > (b) ? (a) : (b))

#endif
