/* minfer run: generate text from a prompt (streamed to stdout), or print the generated ids (--ids). */
#include "cli/cli.h"
#include "core/core.h" /* mf_time_now */

#include "minfer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: minfer run -m MODEL (-p PROMPT | -f FILE | --tokens JSON_IDS) [options]\n"
        "       minfer run --cnv -m MODEL [chat options]   (the same as minfer chat)\n"
        "\n"
        "Generates text after the prompt and streams it to stdout; load time and prefill/decode speed go to\n"
        "stderr.  Generation stops at an end-of-generation token, after -n tokens, at a --stop string, or\n"
        "when the context is full.\n"
        "\n"
        "  -m, --model FILE         GGUF model (qwen2, qwen3, qwen3moe, qwen2moe architectures)\n"
        "  -p, --prompt TEXT        prompt text\n"
        "  -f, --file FILE          read the prompt from FILE: its bytes exactly, as tokenize -f reads them\n"
        "      --tokens JSON_IDS    prompt as token ids, e.g. '[9707, 11, 1879]' (no tokenizer involved)\n"
        "  -n, --n-predict N        tokens to generate (default 128)\n"
        "      --chat               render the prompt as a user turn with the model's chat template\n"
        "      --system TEXT        system message for --chat\n"
        "      --chat-template NAME chat format for --chat: auto (default: recognise the model's template),\n"
        "                           chatml, qwen2.5, qwen3\n"
        "      --think on|off       Qwen3 thinking switch for --chat (default: the template's, i.e. on);\n"
        "                           refused with a template that has no switch (chatml, qwen2.5)\n"
        "  -t, --threads N          CPU threads, also for the repack at load (default: online CPUs, at most 16)\n"
        "  -c, --ctx-size N         context size in tokens (default: min(training context, 4096)); it must\n"
        "                           hold the prompt plus one generated token\n"
        "      --n-ctx N            the same as -c\n"
        MF_ARG_CACHE_HELP
        MF_ARG_ROPE_HELP
        MF_ARG_GPU_HELP
        MF_ARG_DRAFT_HELP
        "%s"
        "      --stop S             stop when the text S appears; S is not printed (a stop string split across\n"
        "                           tokens is held back until decided); repeatable, up to 16\n"
        "      --ignore-eos         keep generating past end-of-generation tokens\n"
        "      --ids                print one JSON array of the generated ids on stdout instead of text\n"
        "  -h, --help               this help\n"
        "\n"
        "Sampler order (llama.cpp's default): penalties -> top-k -> typical -> top-p -> min-p -> temperature "
        "-> draw.\n"
        "With -md the summary line adds the drafted and accepted tokens and the acceptance rate.\n"
        "Numbers must be finite and in range; every option but --stop is given at most once.  A write to stdout that\n"
        "fails (a full disk, a closed pipe) stops the run with exit status 1, as does a model whose logits\n"
        "come out NaN or infinite (the error names the position).\n"
        "Short form: minfer MODEL.gguf [PROMPT] [options] is minfer run -m MODEL.gguf [-p PROMPT] "
        "[options].\n"
        "--cnv anywhere on the line turns it into minfer chat (see minfer chat --help).\n",
        mf_arg_sampler_help());
}

static void progress(float p, void *user) {
    (void)user;
    (void)p;
}

int mf_cmd_run(int argc, char **argv) {
    const char *model_path = NULL, *prompt = NULL, *file = NULL, *tokens_json = NULL, *system = NULL;
    long n_predict = 128, n_threads = 0, n_ctx = 0;
    bool chat = false, ids_only = false, ignore_eos = false;
    const char *chat_template = NULL;
    int think = -1;
    mf_sampler_params sp = mf_arg_sampler_defaults();
    mf_arg_seen seen = {0};
    /* --cnv is chat's other spelling (llama.cpp's): the rest of the line is chat's */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--cnv")) {
            memmove(argv + i, argv + i + 1, sizeof *argv * (size_t)(argc - i)); /* argv[argc] is NULL */
            return mf_cmd_chat(argc - 1, argv);
        }
    const char *stops[MF_ARG_MAX_STOP];
    int32_t n_stop = 0;
    mf_arg_cache cache = MF_ARG_CACHE_INIT;
    mf_arg_draft dr;
    mf_arg_grammar gram = {0};
    mf_grammar *grammar = NULL;
    mf_arg_draft_init(&dr);
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
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            MF_ARG_VAL("-p/--prompt");
            prompt = v;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            MF_ARG_VAL("-f/--file");
            file = v;
        } else if (!strcmp(a, "--tokens")) {
            MF_ARG_VAL("--tokens");
            tokens_json = v;
        } else if (!strcmp(a, "--system")) {
            MF_ARG_VAL("--system");
            system = v;
        } else if (!strcmp(a, "--chat")) {
            MF_ARG_ONCE("--chat");
            chat = true;
        } else if (!strcmp(a, "--chat-template")) {
            MF_ARG_VAL("--chat-template");
            if (!*v) {
                fprintf(stderr,
                        "Error: --chat-template needs a name (auto, chatml, qwen2.5, qwen3), got ''\n");
                return 2;
            }
            chat_template = v;
        } else if (!strcmp(a, "--think")) {
            MF_ARG_VAL("--think");
            if (!strcmp(v, "on"))
                think = 1;
            else if (!strcmp(v, "off"))
                think = 0;
            else {
                fprintf(stderr, "Error: --think expects on or off, got '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--stop")) {
            if (!mf_arg_stop(argc, argv, &i, stops, &n_stop)) return 2;
        } else if (!strcmp(a, "--ids")) {
            MF_ARG_ONCE("--ids");
            ids_only = true;
        } else if (!strcmp(a, "--ignore-eos")) {
            MF_ARG_ONCE("--ignore-eos");
            ignore_eos = true;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            MF_ARG_VAL("-n/--n-predict");
            if (!mf_arg_int(a, v, 0, 1 << 30, &n_predict)) return 2;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            MF_ARG_VAL("-t/--threads");
            if (!mf_arg_int(a, v, 1, 1024, &n_threads)) return 2;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size") || !strcmp(a, "--n-ctx")) {
            MF_ARG_VAL("-c/--ctx-size/--n-ctx");
            if (!mf_arg_int(a, v, 0, 1 << 24, &n_ctx)) return 2;
        } else if ((l = mf_arg_sampler(argc, argv, &i, &sp, &seen)) != 0) {
            if (l < 0) return 2;
        } else if ((l = mf_arg_grammar_flag(argc, argv, &i, &gram)) != 0) {
            if (l < 0) return 2;
        } else {
            fprintf(stderr, "Error: unknown flag '%s' for 'minfer run' (see minfer run --help)\n", a);
            return 2;
        }
    }
    uint32_t type_k, type_v;
    mf_model_params mp = mf_model_default_params();
    if (!mf_arg_cache_type(&cache, &type_k, &type_v) || !mf_arg_draft_check(&dr) || !mf_arg_gpu_resolve(&gpu, &mp))
        return 2;
    if (!model_path) {
        fprintf(stderr, "Error: no model given: minfer run -m MODEL.gguf -p PROMPT\n");
        return 2;
    }
    int n_src = (prompt != NULL) + (file != NULL) + (tokens_json != NULL);
    if (n_src != 1) {
        char given[64] = "no prompt given";
        if (n_src > 1)
            snprintf(given, sizeof given, "%s%s%s%s%s both given", prompt ? "-p" : "", prompt ? " and " : "",
                     file ? "-f" : "", file && tokens_json ? " and " : "", tokens_json ? "--tokens" : "");
        if (n_src == 3) snprintf(given, sizeof given, "-p, -f and --tokens all given");
        fprintf(stderr, "Error: %s; give exactly one prompt source: -p TEXT, -f FILE or --tokens JSON_IDS\n",
                given);
        return 2;
    }
    if (chat && tokens_json) {
        fprintf(stderr, "Error: --chat renders text; it cannot be combined with --tokens\n");
        return 2;
    }
    if ((system || chat_template || think >= 0) && !chat) {
        fprintf(stderr, "Error: --system, --chat-template and --think only apply with --chat\n");
        return 2;
    }
    mf_token *ids = NULL;
    int32_t n_ids = 0;
    if (tokens_json && !mf_arg_token_ids("--tokens", tokens_json, &ids, &n_ids)) return 2;
    /* the file's bytes exactly, as `minfer tokenize -f` reads them: a NUL byte is text, not the end */
    char *file_text = NULL;
    size_t file_len = 0;
    if (file && !(file_text = mf_read_file(file, &file_len))) return 1;
    if (file && chat && memchr(file_text, 0, file_len)) {
        size_t at = (size_t)((const char *)memchr(file_text, 0, file_len) - file_text);
        fprintf(stderr,
                "Error: '%s' holds a NUL byte at offset %zu; --chat renders the text into the chat template, "
                "which cannot carry it (remove the byte, or drop --chat to tokenize the bytes as they are)\n",
                file, at);
        free(file_text);
        return 2;
    }

    int ret = 1;
    mf_error err = {0};
    mf_model *model = NULL;
    mf_context *ctx = NULL;
    mf_gen *gen = NULL;
    mf_dry_breakers *breakers = NULL; /* DRY's, resolved once the model is loaded */
    mf_model *draft_model = NULL;
    mf_draft *draft = NULL;
    char *rendered = NULL;

    double t0 = mf_time_now();
    mp.progress = progress;
    mp.n_threads = (int32_t)n_threads; /* the repack at load too */
    if (mf_model_load(model_path, &mp, &model, &err)) goto fail;
    if (!mf_arg_gpu_report(&gpu, model)) goto out; /* printed; ret is 1 */
    double t_load = mf_time_now() - t0;
    mf_model_info info;
    mf_model_get_info(model, &info);

    if (!ids) {
        const char *text = prompt ? prompt : file_text;
        size_t text_len = prompt ? strlen(prompt) : file_len;
        if (chat) {
            mf_chat_message msgs[2];
            int nm = 0;
            if (system) msgs[nm++] = (mf_chat_message){.role = "system", .content = system};
            msgs[nm++] = (mf_chat_message){.role = "user", .content = text};
            mf_chat_params cp = mf_chat_default_params();
            cp.template_name = chat_template;
            cp.enable_thinking = think;
            if (mf_chat_apply_with(model, msgs, nm, &cp, &rendered, &err)) goto fail;
            text = rendered;
            text_len = strlen(rendered);
        }
        if (mf_tokenize(model, text, text_len, true, true, &ids, &n_ids, &err)) goto fail;
    }
    if (n_ids == 0) {
        fprintf(stderr, "Error: the prompt is empty (0 tokens)\n");
        ret = 2;
        goto out;
    }
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = (int32_t)n_ctx;
    cp.type_k = type_k;
    cp.rope = cache.rope;
    cp.type_v = type_v;
    cp.n_threads = (int32_t)n_threads;
    if (mf_context_new(model, &cp, &ctx, &err)) goto fail;
    if (mf_arg_draft_open(&dr, ctx, 1, &draft_model, &draft, &err)) goto fail;
    int32_t nc = mf_context_n_ctx(ctx);
    if (n_ids >= nc) {
        fprintf(stderr,
                "Error: the prompt has %d token%s and the context holds %d: it must hold the prompt plus at "
                "least "
                "one generated token (raise -c/--ctx-size to at least %d, or shorten the prompt)\n",
                n_ids, n_ids == 1 ? "" : "s", nc, n_ids + 1);
        goto out;
    }
    mf_gen_params gp = mf_gen_default_params();
    if (mf_arg_sampler_resolve(model, &sp, &breakers, &err)) goto fail;
    gp.sampler = sp;
    gp.n_predict = (int32_t)n_predict;
    gp.ignore_eos = ignore_eos;
    gp.no_text = ids_only && n_stop == 0; /* --ids needs no tokenizer unless a stop string is matched */
    gp.stop = stops;
    gp.n_stop = n_stop;
    if (mf_arg_grammar_open(&gram, &grammar, &err)) goto fail;
    if (mf_gen_new(ctx, &gp, &gen, &err) || (grammar && mf_gen_set_grammar(gen, grammar, NULL, NULL, &err)) ||
        mf_gen_feed(gen, ids, n_ids, &err))
        goto fail;
    mf_context_stats cst;
    mf_context_get_stats(ctx, &cst);
    fprintf(stderr, "load: %.1f ms (%s, %d layers, n_vocab %d); KV cache %d cells, K %s V %s, %.2f MiB\n",
            t_load * 1e3, info.arch, info.n_layer, info.n_vocab, nc, mf_arg_cache_name(type_k),
            mf_arg_cache_name(type_v), (double)cst.kv_bytes / (1 << 20));
    mf_gen_out o;
    do {
        if (mf_gen_step_spec(gen, draft, &o, &err)) goto fail;
        if (!ids_only) {
            fwrite(o.text, 1, o.text_len, stdout);
            if (!mf_out_check(stdout, "stdout")) goto out; /* stop at the first write that failed */
        }
    } while (o.status == MF_GEN_RUNNING);
    if (o.status == MF_GEN_CONTEXT)
        fprintf(stderr, "\nnote: the context is full (%d tokens); stopping (raise -c/--ctx-size)\n", nc);
    int32_t n_all;
    const mf_token *all = mf_gen_tokens(gen, &n_all);
    mf_gen_stats gs;
    mf_gen_get_stats(gen, &gs);
    if (!ids_only) {
        fputc('\n', stdout);
    } else {
        fputc('[', stdout);
        for (int32_t i = n_ids; i < n_all; i++) fprintf(stdout, "%s%d", i > n_ids ? ", " : "", all[i]);
        fputs("]\n", stdout);
    }
    if (!mf_out_check(stdout, "stdout")) goto out;
    int32_t n_gen = gs.turn_generated;
    int32_t n_dec = n_gen > 0 ? n_gen - 1 : 0; /* the first token comes from the prefill's logits */
    fprintf(stderr, "prefill: %d tokens in %.3f s (%.2f tok/s)\n", n_ids, gs.t_prefill_s,
            gs.t_prefill_s > 0 ? n_ids / gs.t_prefill_s : 0.0);
    fprintf(stderr, "decode: %d tokens in %.3f s (%.2f tok/s), stop: %s", n_dec, gs.t_decode_s,
            gs.t_decode_s > 0 ? n_dec / gs.t_decode_s : 0.0, mf_gen_status_name(o.status));
    if (draft)
        fprintf(stderr, ", drafted %lld, accepted %lld (%.1f %%)", (long long)gs.n_drafted, (long long)gs.n_accepted,
                gs.n_drafted ? 100.0 * (double)gs.n_accepted / (double)gs.n_drafted : 0.0);
    fputc('\n', stderr);
    /* the forwards above leave this out, as llama.cpp's eval time does; its own line, as llama.cpp's
     * sampling time (top_k 0 once cost more than a forward here) */
    fprintf(stderr, "sample: %d tokens in %.3f s (%.3f ms a token)\n", n_gen, gs.t_sample_s,
            n_gen > 0 ? 1e3 * gs.t_sample_s / n_gen : 0.0);
    ret = 0;
    goto out;
fail:
    fprintf(stderr, "Error: %s\n", err.msg[0] ? err.msg : "out of memory");
    ret = 1;
out:
    mf_gen_free(gen);
    mf_dry_breakers_free(breakers);
    mf_grammar_free(grammar);
    mf_draft_free(draft);
    mf_model_free(draft_model);
    mf_context_free(ctx);
    mf_model_free(model);
    free(rendered);
    free(ids);
    free(file_text);
    return ret;
}
