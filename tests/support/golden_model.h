/* A golden file's synthetic model, regenerated (test-only, header-only: include it after harness.h).  The
 * embedding and rerank goldens (tests/golden/embed/, rerank/) name the generator's arguments and the written
 * file's sha256; a test regenerates the file and checks the hash, so a drifted generator is reported as such
 * instead of as a numeric difference. */
#ifndef MF_TEST_GOLDEN_MODEL_H
#define MF_TEST_GOLDEN_MODEL_H

#include "minfer.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A golden's token ids (a JSON array) into *out (malloc'd; at least one element); their count. */
static inline int mf_golden_ids(const cJSON *arr, mf_token **out) {
    const int n = cJSON_GetArraySize(arr);
    *out = (mf_token *)malloc(sizeof(mf_token) * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n && *out; i++) (*out)[i] = (mf_token)cJSON_GetArrayItem(arr, i)->valuedouble;
    return n;
}

/* The first largest of n logits (llama.cpp's greedy pick). */
static inline int mf_golden_argmax(const float *l, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (l[i] > l[b]) b = i;
    return b;
}

/* Runs mf-genmodel with args into path. */
static inline bool mf_golden_gen(const char *args, const char *path) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s -q -o %s %s", mf_test_genmodel(), path, args);
    return system(cmd) == 0;
}

static inline bool mf_golden_sha_is(const char *path, const char *want) {
    char cmd[1100], got[128] = {0};
    snprintf(cmd, sizeof cmd, "sha256sum %s", path);
    FILE *p = popen(cmd, "r");
    if (!p) return false;
    if (!fgets(got, sizeof got, p)) got[0] = 0;
    pclose(p);
    return !strncmp(got, want, 64);
}

/* Writes the model of golden doc to gguf: its "generator" "args", then its "sha256" checked.  *type is the
 * --type argument ("" without one).  0 when the file is the recorded one; else a CHECK failed (generator
 * failure or drift, naming `recorder`, the script that re-records the golden) and nothing is left behind. */
static inline int mf_golden_model(const cJSON *doc, const char *gguf, const char *recorder, const char **type) {
    const char *name = cJSON_GetObjectItem(doc, "name")->valuestring;
    const cJSON *args = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "generator"), "args");
    char argv[512] = "";
    *type = "";
    for (int i = 0; i < cJSON_GetArraySize(args); i++) {
        const char *a = cJSON_GetArrayItem(args, i)->valuestring;
        strncat(argv, " ", sizeof argv - strlen(argv) - 1);
        strncat(argv, a, sizeof argv - strlen(argv) - 1);
        if (i && !strcmp(cJSON_GetArrayItem(args, i - 1)->valuestring, "--type")) *type = a;
    }
    if (!mf_golden_gen(argv, gguf)) {
        CHECK(0, "%s: the generator failed (%s)", name, argv);
        remove(gguf);
        return -1;
    }
    if (!mf_golden_sha_is(gguf, cJSON_GetObjectItem(doc, "sha256")->valuestring)) {
        CHECK(0, "%s: the generator drifted (sha256 differs; re-record with %s)", name, recorder);
        remove(gguf);
        return -1;
    }
    return 0;
}

/* Reads tests/golden/<kind>/<file> and writes its model to <tmp>/<kind>-<name>.gguf (gguf, cap bytes) with
 * mf_golden_model.  The document (cJSON_Delete it), or NULL after a failed CHECK. */
static inline cJSON *mf_golden_open(const char *kind, const char *file, const char *recorder, char *gguf, size_t cap,
                                    const char **type) {
    char path[1024];
    snprintf(path, sizeof path, "tests/golden/%s/%s", kind, file);
    char *text = mf_test_slurp(path, NULL);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!j) {
        CHECK(0, "cannot read %s as JSON", path);
        return NULL;
    }
    snprintf(gguf, cap, "%s/%s-%s.gguf", mf_test_tmpdir(), kind, cJSON_GetObjectItem(j, "name")->valuestring);
    if (mf_golden_model(j, gguf, recorder, type)) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

#endif
