/* minfer chat: interactive multi-turn chat on a terminal or a pipe.  Only I/O lives here: the turns,
 * the template diffing and the context shift are mf_conv's, the decode loop is mf_gen's. */
#include "cli/cli.h"

#include "minfer.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: minfer chat -m MODEL [--system TEXT] [--session FILE] [-c N] [--cache-type T] [-n N] [--stop S]\n"
            "                   [sampler options]\n"
            "       (also: minfer run --cnv -m MODEL ...)\n"
            "\n"
            "Interactive chat: each line read from stdin is one user message; the reply is rendered with the\n"
            "model's chat template and streamed to stdout as it decodes, followed by a newline.  Works on a\n"
            "terminal (a '> ' prompt is shown) and on a pipe (no prompt).  Each turn prefills only the tokens it\n"
            "adds.  When a turn would not fit the context, the oldest whole turns after the system prompt are\n"
            "dropped (context shift) and a one-line note goes to stderr.  Ctrl-C stops the current reply (the\n"
            "chat goes on; at the prompt it ends the chat); end of input ends it cleanly (exit status 0).\n"
            "\n"
            "  -m, --model FILE         GGUF model (qwen2, qwen3, qwen3moe, qwen2moe architectures)\n"
            "      --system TEXT        system message (kept when old turns are dropped)\n"
            "      --session FILE       keep the conversation in FILE: saved after every reply (KV cache, tokens,\n"
            "                           sampler state, messages) and resumed at start, prefilling nothing and\n"
            "                           continuing exactly as if the chat had not stopped; a file written for\n"
            "                           another model, KV type or a larger -c is not loaded into the cache: its\n"
            "                           conversation is re-rendered from its text instead (a note says why); a\n"
            "                           missing FILE starts a new conversation; the file's system message wins\n"
            "      --chat-template NAME chat format: auto (default: recognise the model's template), chatml,\n"
            "                           qwen2.5, qwen3\n"
            "      --think on|off       Qwen3 thinking switch (default: the template's, i.e. on); refused with a\n"
            "                           template that has no switch\n"
            "  -n, --n-predict N        most tokens per reply (default -1: until end of generation or the context\n"
            "                           end)\n"
            "  -c, --ctx-size N         context size in tokens (default: min(training context, 4096))\n"
            "      --n-ctx N            the same as -c\n"
            "  -t, --threads N          CPU threads, also for the repack at load (default: online CPUs, at most 16)\n"
            MF_ARG_CACHE_HELP
            MF_ARG_ROPE_HELP
            MF_ARG_GPU_HELP
            MF_ARG_DRAFT_HELP
            "%s"
            "      --stop S             end a reply when the text S appears; S is not printed; repeatable, up to 16\n"
            "      --verbose            after each reply, one stats line on stderr: tokens prefilled (only the new\n"
            "                           ones), reused from the cache, generated, and why the reply stopped (with\n"
            "                           -md also the tokens drafted and accepted since the chat began)\n"
            "  -h, --help               this help\n"
            "\n"
            "Every option but --stop is given at most once.  A write to stdout that fails ends the chat with exit\n"
            "status 1.\n",
            mf_arg_sampler_help());
}

/* Ctrl-C: the handler only sets a flag; the generator's abort callback reads it between forwards. */
static volatile sig_atomic_t g_interrupted;

static void on_sigint(int sig) {
    (void)sig;
    g_interrupted = 1;
}

static bool abort_cb(void *user) {
    (void)user;
    return g_interrupted != 0;
}

/* One line of stdin without its newline (malloc'd), or NULL at end of input / on Ctrl-C. */
static char *read_line(void) {
    char *line = NULL;
    size_t cap = 0;
    errno = 0;
    ssize_t n = getline(&line, &cap, stdin);
    if (n < 0) {
        free(line);
        return NULL;
    }
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
    return line;
}

int mf_cmd_chat(int argc, char **argv) {
    const char *model_path = NULL, *system = NULL, *chat_template = NULL, *session = NULL;
    long n_predict = -1, n_threads = 0, n_ctx = 0;
    int think = -1;
    bool verbose = false;
    const char *stops[MF_ARG_MAX_STOP];
    int32_t n_stop = 0;
    mf_sampler_params sp = mf_arg_sampler_defaults();
    mf_arg_seen seen = {0};
    mf_arg_cache cache = MF_ARG_CACHE_INIT;
    mf_arg_draft dr;
    mf_arg_draft_init(&dr);
    mf_arg_grammar gram = {0};
    mf_grammar *grammar = NULL;
    mf_arg_gpu gpu;
    mf_arg_gpu_init(&gpu);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        long l;
        const int f = mf_arg_engine_flag(argc, argv, &i, &seen, &cache, &gpu, &dr);
        if (f < 0) return 2;
        if (f > 0) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return mf_out_check(stdout, "stdout") ? 0 : 1;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            MF_ARG_VAL("-m/--model");
            model_path = v;
        } else if (!strcmp(a, "--system")) {
            MF_ARG_VAL("--system");
            system = v;
        } else if (!strcmp(a, "--session")) {
            MF_ARG_VAL("--session");
            if (!*v) {
                fprintf(stderr, "Error: --session needs a file name, got ''\n");
                return 2;
            }
            session = v;
        } else if (!strcmp(a, "--chat-template")) {
            MF_ARG_VAL("--chat-template");
            if (!*v) {
                fprintf(stderr, "Error: --chat-template needs a name (auto, chatml, qwen2.5, qwen3), got ''\n");
                return 2;
            }
            chat_template = v;
        } else if (!strcmp(a, "--think")) {
            MF_ARG_VAL("--think");
            if (strcmp(v, "on") && strcmp(v, "off")) {
                fprintf(stderr, "Error: --think expects on or off, got '%s'\n", v);
                return 2;
            }
            think = !strcmp(v, "on");
        } else if ((l = mf_arg_grammar_flag(argc, argv, &i, &gram)) != 0) {
            if (l < 0) return 2;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            MF_ARG_VAL("-n/--n-predict");
            if (!mf_arg_int(a, v, -1, 1 << 30, &n_predict)) return 2;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            MF_ARG_VAL("-t/--threads");
            if (!mf_arg_int(a, v, 1, 1024, &n_threads)) return 2;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size") || !strcmp(a, "--n-ctx")) {
            MF_ARG_VAL("-c/--ctx-size/--n-ctx");
            if (!mf_arg_int(a, v, 0, 1 << 24, &n_ctx)) return 2;
        } else if (!strcmp(a, "--stop")) {
            if (!mf_arg_stop(argc, argv, &i, stops, &n_stop)) return 2;
        } else if (!strcmp(a, "--verbose")) {
            MF_ARG_ONCE("--verbose");
            verbose = true;
        } else if ((l = mf_arg_sampler(argc, argv, &i, &sp, &seen)) != 0) {
            if (l < 0) return 2;
        } else {
            fprintf(stderr, "Error: unknown flag '%s' for 'minfer chat' (see minfer chat --help)\n", a);
            return 2;
        }
    }
    if (!model_path) {
        fprintf(stderr, "Error: no model given: minfer chat -m MODEL.gguf\n");
        return 2;
    }
    uint32_t type_k, type_v;
    mf_model_params mp = mf_model_default_params();
    if (!mf_arg_cache_type(&cache, &type_k, &type_v) || !mf_arg_draft_check(&dr) || !mf_arg_gpu_resolve(&gpu, &mp))
        return 2;

    int ret = 1;
    mf_error err = {0};
    mf_model *model = NULL;
    mf_context *ctx = NULL;
    mf_gen *gen = NULL;
    mf_dry_breakers *breakers = NULL; /* DRY's, resolved once the model is loaded */
    mf_conv *conv = NULL;
    mf_model *draft_model = NULL;
    mf_draft *draft = NULL;
    char *line = NULL;
    mp.n_threads = (int32_t)n_threads; /* the repack at load too */
    if (mf_model_load(model_path, &mp, &model, &err)) goto fail;
    if (!mf_arg_gpu_report(&gpu, model)) goto out; /* printed; ret is 1 */
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = (int32_t)n_ctx;
    cp.n_threads = (int32_t)n_threads;
    cp.type_k = type_k;
    cp.rope = cache.rope;
    cp.type_v = type_v;
    if (mf_context_new(model, &cp, &ctx, &err)) goto fail;
    if (mf_arg_draft_open(&dr, ctx, 1, &draft_model, &draft, &err)) goto fail;
    mf_gen_params gp = mf_gen_default_params();
    if (mf_arg_sampler_resolve(model, &sp, &breakers, &err)) goto fail;
    gp.sampler = sp;
    gp.n_predict = (int32_t)n_predict;
    gp.stop = stops;
    gp.n_stop = n_stop;
    gp.abort = abort_cb;
    if (mf_gen_new(ctx, &gp, &gen, &err) || mf_arg_grammar_open(&gram, &grammar, &err)) goto fail;
    if (grammar) { /* each reply is a sentence of it; a reasoning model may think first (unless --think off) */
        mf_token *ids = NULL;
        int32_t n = 0;
        bool think_block = think != 0 && !mf_tokenize(model, "<think>", 7, false, true, &ids, &n, NULL) && n == 1;
        free(ids);
        if (mf_gen_set_grammar(gen, grammar, think_block ? "<think>" : NULL, think_block ? "</think>" : NULL, &err))
            goto fail;
    }
    mf_conv_params vp = mf_conv_default_params();
    vp.system = system;
    vp.chat.template_name = chat_template;
    vp.chat.enable_thinking = think;
    if (n_predict > 0) vp.n_reserve = (int32_t)n_predict;
    if (mf_conv_new(gen, &vp, &conv, &err)) goto fail;
    if (session) {
        bool rerendered = false;
        char reason[1024];
        int rc = mf_conv_load(conv, session, &rerendered, reason, sizeof reason, &err);
        if (rc == MF_E_NOTFOUND)
            fprintf(stderr, "session: '%s' does not exist yet: a new conversation, saved there after every turn\n",
                    session);
        else if (rc)
            goto fail;
        else if (rerendered)
            fprintf(stderr, "note: the session '%s' does not fit this run (%s); its conversation (%d turns) is "
                    "re-rendered from its text with the next message\n", session, reason, mf_conv_n_turns(conv));
        else {
            mf_gen_stats st;
            mf_gen_get_stats(gen, &st);
            fprintf(stderr, "session: resumed %d turn%s from '%s' (%d tokens cached, 0 prefilled)\n",
                    mf_conv_n_turns(conv), mf_conv_n_turns(conv) == 1 ? "" : "s", session, st.n_cached);
        }
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL); /* no SA_RESTART: Ctrl-C at the prompt ends the read */
    bool tty = isatty(0) && isatty(1);
    int32_t nc = mf_context_n_ctx(ctx), turn = mf_conv_n_turns(conv); /* a resumed chat counts on */
    for (;;) {
        if (tty) {
            fputs("> ", stdout);
            if (!mf_out_check(stdout, "stdout")) goto out;
        }
        g_interrupted = 0;
        free(line);
        if (!(line = read_line())) break; /* end of input, or Ctrl-C at the prompt */
        if (!*line) continue;
        mf_conv_turn ti;
        if (mf_conv_user(conv, line, &ti, &err)) {
            if (err.code != MF_E_RANGE) goto fail;
            fprintf(stderr, "Error: %s\n", err.msg); /* this message is refused, the chat goes on */
            continue;
        }
        turn++;
        if (ti.n_dropped_turns)
            fprintf(stderr, "note: the context (%d tokens) is full: dropped the oldest %d turn%s (%d tokens)\n", nc,
                    ti.n_dropped_turns, ti.n_dropped_turns == 1 ? "" : "s", ti.n_dropped_tokens);
        mf_gen_out o;
        do {
            if (mf_gen_step_spec(gen, draft, &o, &err)) goto fail;
            fwrite(o.text, 1, o.text_len, stdout);
            if (!mf_out_check(stdout, "stdout")) goto out;
        } while (o.status == MF_GEN_RUNNING);
        fputc('\n', stdout);
        if (!mf_out_check(stdout, "stdout")) goto out;
        if (o.status == MF_GEN_ABORT) fprintf(stderr, "note: reply interrupted (Ctrl-C)\n");
        if (o.status == MF_GEN_CONTEXT)
            fprintf(stderr, "note: the context (%d tokens) is full: the reply was cut (raise -c/--ctx-size)\n", nc);
        if (session && mf_conv_save(conv, session, &err)) goto fail;
        if (verbose) {
            mf_gen_stats st;
            mf_gen_get_stats(gen, &st);
            fprintf(stderr, "turn %d: prefilled %d tokens, reused %d, generated %d, stop: %s%s", turn,
                    st.turn_prefilled, ti.n_reused, st.turn_generated, mf_gen_status_name(o.status),
                    ti.rerendered ? " (re-rendered)" : "");
            if (draft) /* totals over the chat so far */
                fprintf(stderr, ", drafted %lld, accepted %lld", (long long)st.n_drafted, (long long)st.n_accepted);
            fputc('\n', stderr);
        }
    }
    ret = 0;
    goto out;
fail:
    fprintf(stderr, "Error: %s\n", err.msg[0] ? err.msg : "out of memory");
    ret = 1;
out:
    free(line);
    mf_conv_free(conv);
    mf_gen_free(gen);
    mf_dry_breakers_free(breakers);
    mf_grammar_free(grammar);
    mf_draft_free(draft);
    mf_model_free(draft_model);
    mf_context_free(ctx);
    mf_model_free(model);
    return ret;
}
