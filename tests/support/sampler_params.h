/* Sampler test helpers shared by test_sampler.c and test_sampler_stages.c (test-only, header-only: include it
 * after harness.h). */
#ifndef MF_TEST_SAMPLER_PARAMS_H
#define MF_TEST_SAMPLER_PARAMS_H

#include "minfer.h"

#include <math.h>
#include <stdio.h>

/* Every truncation and penalty off, temperature 1: a test switches on the stage it looks at. */
static inline mf_sampler_params mf_test_sampler_off(void) {
    mf_sampler_params p = mf_sampler_default_params();
    p.temp = 1.0f, p.top_k = 0, p.top_p = 1.0f, p.min_p = 0.0f, p.typ_p = 1.0f;
    p.penalty_last_n = 64, p.penalty_repeat = 1.0f;
    return p;
}

/* A sampler over n tokens, or NULL with mf_sampler_new's message printed. */
static inline mf_sampler *mf_test_sampler_new(const mf_sampler_params *p, int n) {
    mf_sampler *s = NULL;
    mf_error err = {0};
    if (mf_sampler_new(p, n, &s, &err)) printf("  mf_sampler_new: %s\n", err.msg);
    return s;
}

#define NEAR(a, b) (fabs((double)(a) - (double)(b)) < 1e-5)

#endif
