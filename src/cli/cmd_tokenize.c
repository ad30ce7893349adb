/* minfer tokenize: print the token ids of a text (the model's own tokenizer, no weights needed). */
#include "cli/cli.h"
#include "tok/tok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: minfer tokenize -m MODEL (-p TEXT | -f FILE) [--ids] [--no-special]\n"
               "\n"
               "Tokenizes TEXT with the tokenizer stored in the GGUF model MODEL (only its metadata is read).\n"
               "\n"
               "options:\n"
               "  -m, --model MODEL   GGUF file whose tokenizer.ggml.* vocabulary is used (required)\n"
               "  -p, --prompt TEXT   the text to tokenize\n"
               "  -f, --file FILE     tokenize the bytes of FILE exactly (nothing stripped, no newline added)\n"
               "  --ids               print only one JSON array of token ids, e.g. [9707, 11, 1879, 0]\n"
               "  --no-special        treat control tokens written in the text (<|im_start|>, <|endoftext|> ...)\n"
               "                      as plain text; by default they become their token ids (user-defined\n"
               "                      added tokens such as <think> are always recognised)\n"
               "  -h, --help          this help\n"
               "\n"
               "Without --ids: one line per token, the id and the bytes it decodes to as a JSON-style string\n"
               "(control characters escaped, bytes that are not a whole UTF-8 character as \\xNN).\n"
               "Invalid UTF-8 in the input is tokenized as U+FFFD, one per maximal ill-formed sequence.\n"
               "Every option is given at most once; a failed write to stdout exits with status 1.\n");
}

static void print_piece(const unsigned char *s, size_t n) {
    putchar('"');
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        if (c == '"' || c == '\\') printf("\\%c", c), i++;
        else if (c == '\n') fputs("\\n", stdout), i++;
        else if (c == '\t') fputs("\\t", stdout), i++;
        else if (c == '\r') fputs("\\r", stdout), i++;
        else if (c < 0x20 || c == 0x7f) printf("\\u%04x", c), i++;
        else if (c < 0x80) putchar(c), i++;
        else {
            /* a whole, valid UTF-8 character prints as itself; anything else byte by byte */
            char *fixed = NULL;
            size_t fl = 0, want = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
            bool whole = want > 1 && i + want <= n && !mf_tok_utf8_sanitize((const char *)s + i, want, &fixed, &fl, NULL) &&
                         fl == want && !memcmp(fixed, s + i, want);
            free(fixed);
            if (whole) {
                fwrite(s + i, 1, want, stdout);
                i += want;
            } else {
                printf("\\x%02x", c);
                i++;
            }
        }
    }
    putchar('"');
}

int mf_cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL, *file = NULL;
    bool ids_only = false, no_special = false;
    mf_arg_seen seen = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return mf_out_check(stdout, "stdout") ? 0 : 1;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!(model = mf_arg_value(argc, argv, &i)) || !mf_arg_once(&seen, "-m/--model", model)) return 2;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            if (!(prompt = mf_arg_value(argc, argv, &i)) || !mf_arg_once(&seen, "-p/--prompt", prompt)) return 2;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!(file = mf_arg_value(argc, argv, &i)) || !mf_arg_once(&seen, "-f/--file", file)) return 2;
        } else if (!strcmp(a, "--ids")) {
            MF_ARG_ONCE("--ids");
            ids_only = true;
        } else if (!strcmp(a, "--no-special")) {
            MF_ARG_ONCE("--no-special");
            no_special = true;
        } else {
            fprintf(stderr, "Error: unknown option '%s' (see minfer tokenize --help)\n", a);
            return 2;
        }
    }
    if (!model) {
        fprintf(stderr, "Error: -m MODEL is required (a GGUF file with a tokenizer; see minfer tokenize --help)\n");
        return 2;
    }
    if (!prompt == !file) {
        fprintf(stderr, "Error: give exactly one of -p TEXT or -f FILE (see minfer tokenize --help)\n");
        return 2;
    }
    char *text = NULL;
    size_t len = 0;
    if (file) {
        if (!(text = mf_read_file(file, &len))) return 1;
    } else {
        len = strlen(prompt);
    }
    mf_error err = {0};
    mf_tok *tok = NULL;
    if (mf_tok_load_file(model, &tok, &err)) {
        fprintf(stderr, "Error: %s\n", err.msg);
        free(text);
        return 1;
    }
    mf_tok_ids ids = {0};
    int rc = mf_tok_encode(tok, text ? text : prompt, len, no_special ? 0 : MF_TOK_PARSE_SPECIAL, &ids, &err);
    if (rc) {
        fprintf(stderr, "Error: %s\n", err.msg);
    } else if (ids_only) {
        putchar('[');
        for (size_t i = 0; i < ids.n && !ferror(stdout); i++) printf(i ? ", %d" : "%d", ids.ids[i]);
        puts("]");
    } else {
        for (size_t i = 0; i < ids.n && !ferror(stdout); i++) { /* stop at the first failed write */
            size_t pl = 0;
            const char *p = mf_tok_piece(tok, ids.ids[i], &pl);
            printf("%6d ", ids.ids[i]);
            print_piece((const unsigned char *)p, pl);
            putchar('\n');
        }
    }
    if (!rc && !mf_out_check(stdout, "stdout")) rc = 1;
    free(ids.ids);
    mf_tok_free(tok);
    free(text);
    return rc ? 1 : 0;
}
