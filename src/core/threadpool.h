/* threadpool: persistent workers created once; a dispatch runs fn(ctx, ith, nth) on nth threads with the
 * calling thread as ith = 0.  Waiting threads spin a bounded number of pause iterations, then sleep on a
 * futex, so an idle pool costs nothing and a busy one dispatches in microseconds.  No allocation per
 * dispatch.  One dispatch at a time per pool (the pool is owned by one engine thread). */
#ifndef MF_THREADPOOL_H
#define MF_THREADPOOL_H

#include "core/core.h"

typedef struct mf_threadpool mf_threadpool;
typedef void (*mf_task_fn)(void *ctx, int ith, int nth);

/* n_threads counts the caller: n_threads - 1 workers are started. */
int mf_threadpool_new(int n_threads, mf_threadpool **out, mf_error *err);
void mf_threadpool_free(mf_threadpool *tp);
int mf_threadpool_n_threads(const mf_threadpool *tp);
/* Runs fn on threads 0..nth-1 (nth clamped to 1..n_threads) and returns when all have returned. */
void mf_threadpool_run(mf_threadpool *tp, mf_task_fn fn, void *ctx, int nth);
/* Inside a dispatch: waits until all nth threads of the current dispatch arrive.  Memory written
 * before the barrier by any thread is visible after it to every thread. */
void mf_threadpool_barrier(mf_threadpool *tp);
/* Memory a thread reads next: while it waits at a barrier it prefetches half of [p + done, p + len) into L2
 * (every other 128-byte pair of lines, offsets from p), a few lines a poll, and advances done.  A decode
 * step's bus is idle while one thread finishes a small op (a one-row norm, its share of attention); the
 * other can spend that time on its next weights. */
typedef struct {
    const char *p;
    size_t len, done;
} mf_tp_ahead;
/* mf_threadpool_barrier, reading ahead (ah: NULL or a range, done advanced) while it waits */
void mf_threadpool_barrier_ahead(mf_threadpool *tp, mf_tp_ahead *ah);
/* Bounded spin before sleeping (pause iterations); default 256, MINFER_SPIN overrides at creation.
 * With a nonzero count, waiters then keep polling with sched_yield up to a time budget (MINFER_SPIN_US, default 3000 us,
 * read at creation; 0 = none) before they sleep.  0 iterations: sleep at once. */
void mf_threadpool_set_spin(mf_threadpool *tp, int iterations);

#endif
