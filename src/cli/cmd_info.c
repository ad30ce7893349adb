/* minfer info: a GGUF file's header, metadata and tensor table, read through the validating reader (a
 * file that prints here is one every other command can trust). */
#include "cli/cli.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *model;
    long max_elems, max_str;
    bool tensors, metadata;
} info_opts;

static void usage(FILE *f) {
    fprintf(f, "usage: minfer info -m FILE [options]\n\n"
               "Prints a GGUF file's version, alignment and layout, every metadata key (key, type, value),\n"
               "the tensor table (name, type, shape, bytes, offset in the data section) and totals.\n"
               "The whole file is validated first; a malformed file is refused with the reason.\n\n"
               "options:\n"
               "  -m, --model FILE     the GGUF file to inspect (required)\n"
               "  --max-elems N        array elements shown per key (default 8; 0 = all)\n"
               "  --max-str N          string bytes shown per value (default 120; 0 = all)\n"
               "  --full               show everything: same as --max-elems 0 --max-str 0\n"
               "  --no-metadata        skip the metadata listing\n"
               "  --no-tensors         skip the tensor table (totals are still printed)\n"
               "  -h, --help           this help\n\n"
               "Every option is given at most once (--full does not mix with --max-elems/--max-str).\n"
               "exit status: 0 ok, 1 the file was refused or unreadable or a write to stdout failed, 2 bad usage\n");
}

/* 0 = ok, 1 = help printed, 2 = usage error (message printed) */
static int parse_args(int argc, char **argv, info_opts *o) {
    *o = (info_opts){NULL, 8, 120, true, true};
    mf_arg_seen seen = {0};
    const char *full = NULL, *limit = NULL; /* --full sets both limits: it does not mix with either */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!(v = mf_arg_value(argc, argv, &i)) || !mf_arg_once(&seen, "-m/--model", v)) return 2;
            o->model = v;
        } else if (!strcmp(a, "--max-elems")) {
            if (!(v = mf_arg_value(argc, argv, &i)) || !mf_arg_once(&seen, a, v) ||
                !mf_arg_int(a, v, 0, 1000000000L, &o->max_elems))
                return 2;
            limit = a;
        } else if (!strcmp(a, "--max-str")) {
            if (!(v = mf_arg_value(argc, argv, &i)) || !mf_arg_once(&seen, a, v) ||
                !mf_arg_int(a, v, 0, 1000000000L, &o->max_str))
                return 2;
            limit = a;
        } else if (!strcmp(a, "--full")) {
            if (!mf_arg_once(&seen, a, NULL)) return 2;
            full = a;
        } else if (!strcmp(a, "--no-tensors")) {
            if (!mf_arg_once(&seen, a, NULL)) return 2;
            o->tensors = false;
        } else if (!strcmp(a, "--no-metadata")) {
            if (!mf_arg_once(&seen, a, NULL)) return 2;
            o->metadata = false;
        } else {
            fprintf(stderr, "Error: unknown option '%s' for minfer info (see minfer info --help)\n", a);
            return 2;
        }
    }
    if (full && limit) {
        fprintf(stderr,
                "Error: --full and %s both given; --full means --max-elems 0 --max-str 0, give one or the other\n",
                limit);
        return 2;
    }
    if (full) o->max_elems = o->max_str = 0;
    if (!o->model) {
        fprintf(stderr, "Error: minfer info needs -m FILE (see minfer info --help)\n");
        return 2;
    }
    return 0;
}

/* Names come from the file: print control bytes escaped so a hostile name cannot drive the terminal. */
static void print_name(mf_str s, int width) {
    int n = 0;
    for (uint64_t i = 0; i < s.len; i++) {
        unsigned char c = (unsigned char)s.ptr[i];
        n += c < 0x20 || c == 0x7f ? printf("\\x%02x", c) : (putchar(c), 1);
    }
    for (; n < width; n++) putchar(' ');
}

static void human_bytes(uint64_t b, char *buf, size_t cap) {
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%llu B", (unsigned long long)b);
    else
        snprintf(buf, cap, "%.1f %s", v, units[u]);
}

static int print_metadata(const mf_gguf *g, const info_opts *o) {
    int64_t n = mf_gguf_n_kv(g);
    int width = 0;
    for (int64_t i = 0; i < n; i++) {
        int len = (int)MF_MIN(mf_gguf_kv_key(g, i).len, 48);
        width = MF_MAX(width, len);
    }
    printf("metadata:  %lld keys\n", (long long)n);
    size_t cap = 4096;
    char *buf = malloc(cap);
    if (!buf) {
        fprintf(stderr, "Error: out of memory formatting metadata\n");
        return 1;
    }
    for (int64_t i = 0; i < n && !ferror(stdout); i++) {
        size_t need = mf_gguf_kv_format(g, i, (size_t)o->max_elems, (size_t)o->max_str, buf, cap);
        if (need >= cap) { /* --full on a long value: grow once to the exact size */
            char *nb = realloc(buf, need + 1);
            if (!nb) {
                free(buf);
                fprintf(stderr, "Error: out of memory formatting key %lld (%zu bytes)\n", (long long)i, need);
                return 1;
            }
            buf = nb;
            cap = need + 1;
            mf_gguf_kv_format(g, i, (size_t)o->max_elems, (size_t)o->max_str, buf, cap);
        }
        printf("  ");
        print_name(mf_gguf_kv_key(g, i), width);
        printf("  %-6s  %s\n", mf_gguf_type_name(mf_gguf_kv_type(g, i)), buf);
    }
    free(buf);
    return 0;
}

static void shape_str(const mf_gguf_tensor *t, char *buf, size_t cap) {
    size_t o = 0;
    o += (size_t)snprintf(buf + o, cap - o, "[");
    for (uint32_t d = 0; d < t->n_dims && o < cap; d++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", d ? ", " : "", (long long)t->ne[d]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
}

static void print_tensors(const mf_gguf *g, const info_opts *o) {
    int64_t n = mf_gguf_n_tensors(g);
    uint64_t total_bytes = 0, total_elems = 0;
    int width = 4;
    for (int64_t i = 0; i < n; i++) width = MF_MAX(width, (int)mf_gguf_tensor_at(g, i)->name.len);
    if (o->tensors) {
        printf("tensors:   %lld\n", (long long)n);
        printf("  %-5s ", "#");
        print_name((mf_str){"name", 4}, width);
        printf("  %-6s  %-28s %14s %14s\n", "type", "shape", "bytes", "offset");
    }
    for (int64_t i = 0; i < n; i++) {
        const mf_gguf_tensor *t = mf_gguf_tensor_at(g, i);
        uint64_t elems = 1;
        for (int d = 0; d < MF_GGUF_MAX_DIMS; d++) elems *= (uint64_t)t->ne[d]; /* validated: fits 63 bits */
        total_elems += elems;
        total_bytes += t->nbytes; /* validated: every tensor lies inside the file */
        if (!o->tensors || ferror(stdout)) continue;
        char shape[96];
        shape_str(t, shape, sizeof shape);
        printf("  %-5lld ", (long long)i);
        print_name(t->name, width);
        printf("  %-6s  %-28s %14llu %14llu\n", mf_type_name(t->type), shape, (unsigned long long)t->nbytes,
               (unsigned long long)t->offset);
    }
    char hb[32];
    human_bytes(total_bytes, hb, sizeof hb);
    printf("total:     %lld tensors, %llu elements, %llu bytes (%s)\n", (long long)n, (unsigned long long)total_elems,
           (unsigned long long)total_bytes, hb);
}

int mf_cmd_info(int argc, char **argv) {
    info_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc == 1) return mf_out_check(stdout, "stdout") ? 0 : 1;
    if (rc) return 2;
    mf_gguf *g = NULL;
    mf_error err = {0};
    if (mf_gguf_open(o.model, &g, &err)) {
        fprintf(stderr, "Error: %s\n", err.msg);
        return 1;
    }
    char hb[32];
    human_bytes(mf_gguf_file_size(g), hb, sizeof hb);
    printf("file:      %s\n", o.model);
    printf("gguf:      version %u, alignment %llu, data section at byte %llu, file %llu bytes (%s)\n",
           mf_gguf_version(g), (unsigned long long)mf_gguf_alignment(g), (unsigned long long)mf_gguf_data_offset(g),
           (unsigned long long)mf_gguf_file_size(g), hb);
    rc = o.metadata ? print_metadata(g, &o) : 0;
    if (!rc) print_tensors(g, &o);
    mf_gguf_close(g);
    if (!rc && !mf_out_check(stdout, "stdout")) rc = 1;
    return rc;
}
