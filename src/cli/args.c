/* Argument helpers shared by the subcommands: strict number parsing with messages that name the flag. */
#include "cli/cli.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool mf_arg_int(const char *flag, const char *val, long min, long max, long *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (errno || end == val || *end) {
        fprintf(stderr, "Error: %s expects an integer, got '%s'\n", flag, val);
        return false;
    }
    if (v < min || v > max) {
        fprintf(stderr, "Error: %s must be in [%ld, %ld], got %ld\n", flag, min, max, v);
        return false;
    }
    *out = v;
    return true;
}

bool mf_arg_float(const char *flag, const char *val, double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(val, &end);
    if (errno || end == val || *end) {
        fprintf(stderr, "Error: %s expects a number, got '%s'\n", flag, val);
        return false;
    }
    *out = v;
    return true;
}

const char *mf_arg_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "Error: %s needs a value\n", argv[*i]);
        return NULL;
    }
    *i += 1;
    return argv[*i];
}

char *mf_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "Error: cannot open '%s': %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (n < cap) break;
        char *nb = realloc(buf, cap * 2 + 1);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    bool bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        fprintf(stderr, "Error: cannot read '%s'\n", path);
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

/* A JSON array of token ids such as "[9707, 11, 1879]" (whitespace allowed): *out malloc'd. */
bool mf_arg_token_ids(const char *flag, const char *s, int32_t **out, int32_t *n) {
    *out = NULL;
    *n = 0;
    size_t cap = 64, k = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids) return false;
    const char *p = s;
    while (*p == ' ' || *p == '\n' || *p == '\t') p++;
    if (*p++ != '[') goto bad;
    for (;;) {
        while (*p == ' ' || *p == '\n' || *p == '\t') p++;
        if (*p == ']' && k == 0) {
            p++;
            break;
        }
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX) goto bad;
        if (k == cap) {
            int32_t *ni = realloc(ids, 2 * cap * sizeof *ids);
            if (!ni) goto bad;
            ids = ni;
            cap *= 2;
        }
        ids[k++] = (int32_t)v;
        p = end;
        while (*p == ' ' || *p == '\n' || *p == '\t') p++;
        if (*p == ',') {
            p++;
            continue;
        }
        if (*p++ == ']') break;
        goto bad;
    }
    while (*p == ' ' || *p == '\n' || *p == '\t') p++;
    if (*p) goto bad;
    *out = ids;
    *n = (int32_t)k;
    return true;
bad:
    free(ids);
    fprintf(stderr, "Error: %s expects a JSON array of non-negative integers, got '%.60s'\n", flag, s);
    return false;
}
