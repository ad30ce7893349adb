/* threadpool: see threadpool.h.  Dispatch = bump a generation counter; completion = a barrier that
 * every participant (caller included) passes at the end of fn.  Sleeping uses Linux futexes on the
 * counters themselves, and a waker only issues the wake syscall when someone is actually asleep. */
#include "core/threadpool.h"

#include "core/env.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#define CPU_PAUSE() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define CPU_PAUSE() __asm__ __volatile__("yield")
#else
#define CPU_PAUSE() ((void)0)
#endif

/* keep the hot counters on separate cache lines */
typedef struct {
    _Alignas(64) atomic_uint v;
} padded_uint;

struct mf_threadpool {
    int n_threads;
    atomic_int spin; /* read by idle workers, settable any time */
    int64_t spin_ns; /* after the spin iterations, keep spinning until this much time has passed */
    pthread_t *threads;
    int n_started;

    /* the current dispatch (written by the caller before bumping gen) */
    mf_task_fn fn;
    void *ctx;
    int nth;
    atomic_int stop;

    padded_uint gen; /* dispatch generation */
    padded_uint gen_sleepers;
    padded_uint bar_count; /* arrivals at the current barrier */
    padded_uint bar_phase; /* barrier generation */
    padded_uint bar_sleepers;
    padded_uint done; /* workers finished with the current dispatch (every worker checks in) */
    padded_uint done_sleepers;
};

typedef struct {
    mf_threadpool *tp;
    int ith;
} worker_arg;

static void futex_wait(atomic_uint *addr, unsigned val) {
#ifdef __linux__
    /* Bounded sleep: the caller re-checks the word after every return, so a wake-up lost by the
     * (virtualised) kernel costs at most this long instead of hanging the pool. */
    struct timespec ts = {0, 10 * 1000 * 1000};
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAIT_PRIVATE, val, &ts, NULL, 0);
#else
    (void)addr;
    (void)val;
    sched_yield();
#endif
}

static void futex_wake_all(atomic_uint *addr) {
#ifdef __linux__
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    (void)addr;
#endif
}

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* One poll's worth of read-ahead: AHEAD_LINES lines of *ah (prefetcht1: into L2, not L1, which the op
 * after the barrier needs for itself), every other 128-byte pair of lines.  So the reader later finds half
 * its lines in L2 and misses the others, and memory streams from its first line on; with every line
 * present the bus idled until the reader reached the end of the range (tg128 on Zen 5, round-robin: the
 * first 256 KiB every line +0-5 % over none, the first 512 KiB every other pair +1-8 %).  Returns false
 * when there is nothing left to read ahead. */
#define AHEAD_LINES 8
static bool read_ahead(mf_tp_ahead *ah) {
    if (!ah || ah->done >= ah->len) return false;
    for (int k = 0; k < AHEAD_LINES && ah->done < ah->len; k++) {
        __builtin_prefetch(ah->p + ah->done, 0, 2);
        ah->done += ah->done & 64 ? 64 + 128 : 64; /* after a pair's second line, past the next pair */
    }
    return true;
}

/* waits until *addr != old: spin (at least `spin` pauses, then until spin_ns have passed), then sleep.
 * The time budget matters where a futex wake-up costs milliseconds (virtual machines): the gap between
 * two decode steps (sampling, graph lookup) must not put the workers to sleep.  While there is read-ahead
 * (ah; NULL: none) a poll prefetches instead of pausing. */
static unsigned wait_change(atomic_uint *addr, atomic_uint *sleepers, unsigned old, int spin, int64_t spin_ns,
                            mf_tp_ahead *ah) {
    unsigned v;
    for (int i = 0; i < spin; i++) {
        v = atomic_load_explicit(addr, memory_order_acquire);
        if (v != old) return v;
        if (!read_ahead(ah)) CPU_PAUSE();
    }
    if (spin > 0 && spin_ns > 0) {
        const int64_t t0 = now_ns();
        do {
            for (int i = 0; i < 16; i++) {
                v = atomic_load_explicit(addr, memory_order_acquire);
                if (v != old) return v;
                if (!read_ahead(ah)) CPU_PAUSE();
            }
            sched_yield(); /* an oversubscribed machine: let the thread we wait for have the core */
        } while (now_ns() - t0 < spin_ns);
    }
    for (;;) {
        v = atomic_load_explicit(addr, memory_order_acquire);
        if (v != old) return v;
        atomic_fetch_add(sleepers, 1);
        /* the futex re-checks *addr == old atomically, so a wake between our load and the sleep is
         * never lost: the waker bumps *addr first, then reads sleepers (both seq_cst) */
        futex_wait(addr, old);
        atomic_fetch_sub(sleepers, 1);
    }
}

static void bump_and_wake(atomic_uint *addr, atomic_uint *sleepers) {
    atomic_fetch_add(addr, 1);
    if (atomic_load(sleepers) > 0) futex_wake_all(addr);
}

void mf_threadpool_barrier_ahead(mf_threadpool *tp, mf_tp_ahead *ah) {
    int nth = tp->nth;
    if (nth <= 1) return;
    unsigned phase = atomic_load_explicit(&tp->bar_phase.v, memory_order_acquire);
    if (atomic_fetch_add_explicit(&tp->bar_count.v, 1, memory_order_acq_rel) == (unsigned)nth - 1) {
        atomic_store_explicit(&tp->bar_count.v, 0, memory_order_relaxed);
        bump_and_wake(&tp->bar_phase.v, &tp->bar_sleepers.v);
    } else {
        wait_change(&tp->bar_phase.v, &tp->bar_sleepers.v, phase,
                    atomic_load_explicit(&tp->spin, memory_order_relaxed), tp->spin_ns, ah);
    }
}

void mf_threadpool_barrier(mf_threadpool *tp) {
    mf_threadpool_barrier_ahead(tp, NULL);
}

static void *worker_main(void *p) {
    worker_arg a = *(worker_arg *)p;
    free(p);
    mf_threadpool *tp = a.tp;
    unsigned seen = 0; /* gen at creation: a worker that starts late must still see the first dispatch */
    for (;;) {
        seen = wait_change(&tp->gen.v, &tp->gen_sleepers.v, seen,
                           atomic_load_explicit(&tp->spin, memory_order_relaxed), tp->spin_ns, NULL);
        if (atomic_load_explicit(&tp->stop, memory_order_acquire)) break;
        int nth = tp->nth;
        if (a.ith < nth) tp->fn(tp->ctx, a.ith, nth);
        /* every worker checks in, participant or not, so the caller never rewrites fn/ctx/nth while a
         * worker could still read them */
        if (atomic_fetch_add(&tp->done.v, 1) + 1 == (unsigned)tp->n_threads - 1 &&
            atomic_load(&tp->done_sleepers.v))
            futex_wake_all(&tp->done.v);
    }
    return NULL;
}

int mf_threadpool_new(int n_threads, mf_threadpool **out, mf_error *err) {
    *out = NULL;
    if (n_threads < 1 || n_threads > 1024)
        return mf_err(err, MF_E_INVAL, "thread count %d is out of range 1..1024 (--threads)", n_threads);
    uint64_t spin = 0, spin_us = 0; /* the table's ranges keep both far inside int / int64 nanoseconds */
    int rc = mf_env_uint("MINFER_SPIN", &spin, err);
    if (!rc) rc = mf_env_uint("MINFER_SPIN_US", &spin_us, err);
    if (rc) return rc;
    mf_threadpool *tp = mf_aligned_alloc(64, sizeof *tp);
    if (!tp) return mf_err(err, MF_E_NOMEM, "out of memory creating a threadpool");
    memset(tp, 0, sizeof *tp);
    tp->n_threads = n_threads;
    atomic_init(&tp->spin, (int)spin);
    tp->spin_ns = (int64_t)spin_us * 1000;
    tp->nth = 1;
    if (n_threads > 1) {
        tp->threads = calloc((size_t)n_threads - 1, sizeof *tp->threads);
        if (!tp->threads) {
            mf_aligned_free(tp);
            return mf_err(err, MF_E_NOMEM, "out of memory creating %d worker threads", n_threads - 1);
        }
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *a = malloc(sizeof *a);
        const bool no_memory = !a;
        int rc = a ? 0 : ENOMEM;
        if (a) {
            a->tp = tp;
            a->ith = i;
            rc = pthread_create(&tp->threads[i - 1], NULL, worker_main, a);
            if (rc) free(a);
        }
        if (rc) {
            mf_threadpool_free(tp);
            if (no_memory) return mf_err(err, MF_E_NOMEM, "out of memory starting worker thread %d of %d", i, n_threads);
            return mf_err(err, MF_E_NOMEM, "cannot start worker thread %d of %d (%s); try fewer --threads", i,
                          n_threads, strerror(rc));
        }
        tp->n_started++;
    }
    *out = tp;
    return 0;
}

void mf_threadpool_free(mf_threadpool *tp) {
    if (!tp) return;
    atomic_store(&tp->stop, 1);
    bump_and_wake(&tp->gen.v, &tp->gen_sleepers.v);
    for (int i = 0; i < tp->n_started; i++) pthread_join(tp->threads[i], NULL);
    free(tp->threads);
    mf_aligned_free(tp);
}

int mf_threadpool_n_threads(const mf_threadpool *tp) {
    return tp ? tp->n_threads : 1;
}

void mf_threadpool_set_spin(mf_threadpool *tp, int iterations) {
    if (tp) atomic_store_explicit(&tp->spin, iterations < 0 ? 0 : iterations, memory_order_relaxed);
}

void mf_threadpool_run(mf_threadpool *tp, mf_task_fn fn, void *ctx, int nth) {
    if (nth < 1) nth = 1;
    if (nth > tp->n_threads) nth = tp->n_threads;
    tp->fn = fn;
    tp->ctx = ctx;
    tp->nth = nth;
    if (tp->n_threads == 1) {
        fn(ctx, 0, 1);
        return;
    }
    atomic_store(&tp->done.v, 0);
    bump_and_wake(&tp->gen.v, &tp->gen_sleepers.v); /* seq_cst: publishes fn/ctx/nth */
    fn(ctx, 0, nth);
    unsigned want = (unsigned)tp->n_threads - 1, v;
    const int spin = atomic_load_explicit(&tp->spin, memory_order_relaxed);
    int64_t t0 = 0;
    for (int i = 0; (v = atomic_load_explicit(&tp->done.v, memory_order_acquire)) != want; i++) {
        if (i < spin) {
            CPU_PAUSE();
            continue;
        }
        if (spin > 0 && tp->spin_ns > 0) {
            if (i == spin) t0 = now_ns();
            if ((i & 15) || now_ns() - t0 < tp->spin_ns) {
                if (i & 15)
                    CPU_PAUSE();
                else
                    sched_yield();
                continue;
            }
        }
        atomic_fetch_add(&tp->done_sleepers.v, 1);
        futex_wait(&tp->done.v, v);
        atomic_fetch_sub(&tp->done_sleepers.v, 1);
    }
}
