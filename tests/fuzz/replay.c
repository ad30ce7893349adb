/* A main() for the fuzz harnesses without libFuzzer: runs LLVMFuzzerTestOneInput once on every file
 * named (a folder: every file in it).  Built with the regular compiler in every `make` as
 * $(BUILD)/fuzz-replay/fuzz_<name>, so the seed corpora (regress-* inputs included) are replayed by
 * `make test` (tests/cli/fuzz_seeds.sh) and under `make asan`, and the harnesses stay gcc-clean.
 * Each input is handed over in an exact-size allocation, so an over-read shows under ASan. */
#include "fuzz.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Without a sanitizer runtime there is no report channel: FAIL_IF's message goes to stderr.  (With
 * one, this definition takes the place of its weak default; the message goes to stderr either way.) */
void __sanitizer_report_error_summary(const char *error_summary) { fprintf(stderr, "%s\n", error_summary); }

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    return 0;
}

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open '%s'\n", path);
        return -1;
    }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (!buf) break;
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        uint8_t *nb = realloc(buf, cap *= 2);
        if (!nb) free(buf);
        buf = nb;
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "replay: out of memory reading '%s'\n", path);
        return -1;
    }
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    LLVMFuzzerInitialize(&argc, &argv);
    int n = 0, failed = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: no such file or folder '%s'\n", argv[i]);
            failed++;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            failed += replay_file(argv[i]) != 0;
            n++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d) {
            failed++;
            continue;
        }
        char **names = NULL;
        size_t k = 0, cap = 0;
        for (struct dirent *e; (e = readdir(d));) {
            if (e->d_name[0] == '.') continue;
            if (k == cap) {
                char **nn = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *names);
                if (!nn) break;
                names = nn;
            }
            size_t len = strlen(argv[i]) + strlen(e->d_name) + 2;
            if (!(names[k] = malloc(len))) break;
            snprintf(names[k++], len, "%s/%s", argv[i], e->d_name);
        }
        closedir(d);
        qsort(names, k, sizeof *names, by_name);
        for (size_t j = 0; j < k; j++) {
            failed += replay_file(names[j]) != 0;
            n++;
            free(names[j]);
        }
        free(names);
    }
    printf("replayed %d inputs, %d unreadable\n", n, failed);
    return failed ? 1 : 0;
}
