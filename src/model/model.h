/* model: everything a GGUF file says about the model - hyper-parameters, weights bound into the mmap
 * (no copy; optionally repacked), the tokenizer and the one end-of-generation list - and the graph
 * builder for the Qwen family (qwen2 = QKV bias, qwen3 = per-head q/k RMS norm, qwen3moe / qwen2moe = their
 * attention with a mixture of experts; llama.cpp's order).
 * The engine consumes the loaded model; it loads nothing itself. */
#ifndef MF_MODEL_H
#define MF_MODEL_H

#include "core/core.h"
#include "gguf/gguf.h"
#include "graph/graph.h"
#include "kv/kv.h"
#include "tok/tok.h"

typedef enum { MF_ARCH_QWEN2 = 0, MF_ARCH_QWEN3 = 1, MF_ARCH_QWEN3MOE = 2, MF_ARCH_QWEN2MOE = 3, MF_ARCH_COUNT } mf_arch;

#define MF_SUPPORTED_ARCHS "qwen2, qwen3, qwen3moe, qwen2moe"

typedef struct {
    mf_arch arch;
    char arch_name[32];
    int32_t n_vocab, n_ctx_train, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_rot;
    int32_t n_embd_q, n_embd_kv; /* head_dim * n_head, head_dim * n_head_kv */
    float rms_eps, rope_freq_base;
    /* rope scaling as llama.cpp reads it: the type (MF_ROPE_SCALING_NONE/_LINEAR/_YARN; absent = linear), the
     * train freq_scale (1 / rope.scaling.factor, 1 without), YaRN's original context, rope.scaling.attn_factor */
    int32_t rope_scaling;
    float rope_freq_scale, rope_attn_factor;
    int32_t n_ctx_orig_yarn;
    bool qkv_bias, qk_norm, tied_output;
    int32_t pooling; /* <arch>.pooling_type (llama.cpp's enum: 0 none, 1 mean, 2 cls, 3 last, 4 rank); -1 absent */
    /* A reranker's classifier head (llama.cpp's cls.output, n_cls_out rows): the count of
     * <arch>.classifier.output_labels, 1 when the file names none (llama.cpp's default); 0 without the head. */
    int32_t n_cls_out;
    /* a mixture-of-experts FFN (qwen3moe, qwen2moe): n_expert experts of width n_ff_exp, n_expert_used a token;
     * 0 = dense.  qwen2moe adds a shared expert of width n_ff_shexp every token runs, gated by a sigmoid
     * (0 = none); its routing weights are the softmax probabilities as they are (qwen3moe renormalizes them
     * over the chosen experts: moe_norm). */
    int32_t n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
    bool moe_norm;
} mf_hparams;

typedef struct {
    const mf_gguf_tensor *attn_norm, *wq, *wk, *wv, *bq, *bk, *bv, *q_norm, *k_norm, *wo;
    const mf_gguf_tensor *ffn_norm, *ffn_gate, *ffn_up, *ffn_down;
    /* MoE: the router [n_embd, n_expert] and the experts' matrices [.., .., n_expert] (dense ones NULL) */
    const mf_gguf_tensor *ffn_gate_inp, *ffn_gate_exps, *ffn_up_exps, *ffn_down_exps;
    /* qwen2moe's shared expert: its gate's input weight [n_embd] (one f32 row) and its swiglu FFN (else NULL) */
    const mf_gguf_tensor *ffn_gate_inp_shexp, *ffn_gate_shexp, *ffn_up_shexp, *ffn_down_shexp;
} mf_layer_w;

#define MF_MAX_EOG 16
/* fill-in-the-middle tokens, in mf_model.fim */
enum { MF_FIM_PRE, MF_FIM_SUF, MF_FIM_MID, MF_FIM_REP, MF_FIM_SEP, MF_FIM_COUNT };

/* The loaded model (the public API's mf_model). */
struct mf_model {
    mf_gguf *gguf;
    mf_hparams hp;
    const mf_gguf_tensor *tok_embd, *output_norm, *output;
    const mf_gguf_tensor *cls_out, *cls_out_b; /* a reranker's head (cls.output.weight; .bias: refused), or NULL */
    char **cls_labels;                         /* <arch>.classifier.output_labels (n_cls_labels copies) */
    int32_t n_cls_labels;
    mf_layer_w *layers;
    int32_t bos, eos;        /* -1 when the file names none */
    int32_t fim[MF_FIM_COUNT]; /* fill-in-the-middle tokens (mf_fim order), -1 when absent */
    int32_t eog[MF_MAX_EOG]; /* end of generation: eos, eot, eom, then the tokens llama.cpp knows by text */
    int32_t n_eog;
    mf_tok *tok;          /* NULL when the file's tokenizer cannot be built ... */
    char tok_why[1024];   /* ... and then why (reported when text is tokenized) */
    mf_gguf_tensor *copies;   /* the descriptors of the weights copied at load (layers point at them) */
    int n_copies;
    int n_repacked;           /* ... of which in an x8/x16 layout */
    int n_moved;              /* ... and in their own type, moved into huge pages */
    void *repack_buf;         /* their data, one aligned allocation */
    size_t repack_bytes;      /* the repacked ones' size */
    /* Placement: the backend (registry id) each layer runs on and its weights live on; the embeddings,
     * output norm and LM head live on io_backend.  Repacking is the CPU's decision for the weights it owns;
     * a layer on another backend gets copies of its tensors' descriptors whose data is that backend's
     * address (uploaded once at load; only its hooks reach it). */
    uint16_t *layer_backend;  /* n_layer entries */
    uint16_t io_backend;      /* the embeddings, output norm and LM head (cpu unless every block is off it) */
    int32_t n_gpu_layers;     /* the offload plan's block count (0 without one) */
    size_t gpu_bytes;         /* weight bytes the plan put on the device */
    char offload_report[1024]; /* its report line ("" when no offload was asked) */
    mf_gguf_tensor *placed;   /* the placed descriptors (layers point at them) */
    uint16_t *placed_on;      /* ... and the backend each one's memory belongs to */
    int n_placed;
    size_t placed_bytes;
    char path[512];
};
typedef struct mf_model mf_model;

typedef void (*mf_load_progress_fn)(float progress, void *user);

typedef struct {
    mf_load_progress_fn progress; /* 0 .. 1, never backwards; may be NULL */
    void *progress_user;
    /* Copy the matmul weights into one buffer of huge pages, those that have an x8/x16 layout
     * (quant/repack.c) repacked into it, releasing the file pages of the originals (load_repack.c).  Not the
     * token embedding (GET_ROWS reads its rows in place). */
    bool repack;
    int32_t n_threads; /* threads that repack (<= 1: the loading thread alone) */
    /* Per layer the backend id it runs on (n_layer entries, read at open); NULL = every layer on the CPU.
     * A backend that is not in this build, or has no memory hooks, is refused naming the layer. */
    const uint16_t *layer_backend;
    int32_t n_layer_backend; /* entries in layer_backend: must equal the model's block count */
    uint16_t io_backend;     /* the embeddings, output norm and LM head (0 = cpu) */
    /* Offload (model/offload.h): gpu_layers != 0 (a count, MF_GPU_LAYERS_ALL or _AUTO), or any gpu_origin,
     * makes the plan from the file's tensor sizes and gpu_backend's memory; it decides layer_backend and
     * io_backend and writes the report. */
    int32_t gpu_layers;
    uint16_t gpu_backend;   /* registry id of the device (cuda) */
    const char *gpu_origin; /* how the request was given, for the report and refusals (may be NULL) */
    uint64_t gpu_mem_mib;   /* MINFER_GPU_MEM; 0 = ask the device */
} mf_model_open_params;

/* Read <arch>.* keys.  Unsupported architecture -> MF_E_UNSUPPORTED naming it and the supported ones. */
int mf_hparams_read(const mf_gguf *g, mf_hparams *hp, mf_error *err);
/* The whole load: open (mmap), hparams, vocabulary size, every weight bound (shape and type checked),
 * tokenizer and end-of-generation list, repacking.  Errors say "cannot load model 'PATH': ...". */
int mf_model_open(const char *path, const mf_model_open_params *p, mf_model **out, mf_error *err);
void mf_model_close(mf_model *m);
bool mf_model_token_is_eog(const mf_model *m, int32_t tok);

/* ---- graph builder ---- */
typedef struct {
    int32_t n_tokens;  /* batch rows */
    int32_t n_outputs; /* rows that get logits (selected by GET_ROWS before the last FFN) */
    int32_t n_cells;   /* KV cells per layer */
    uint32_t type_k, type_v; /* KV cache element types */
    int32_t rot_k, rot_v;    /* llama.cpp's attention rotation (core/hadamard.h) sizes for Q/K and V/output; 0 = off */
    void **k_cache, **v_cache; /* per layer region pointers (EXTERNAL data) */
    int32_t *spans;            /* the KV store's spans buffer (kv.h), rebound before every forward */
    bool embeddings;           /* the output is result_norm (n_embd per row, llama.cpp's t_embd): no LM head */
    bool classifier;           /* with embeddings: then the classifier head (cls.output): n_cls_out per row */
    const mf_rope *rope;       /* the context's rope (mf_model_rope) */
} mf_build_params;

/* Builds into g and returns the ids of its inputs and logits in *io. */
int mf_model_build(const mf_model *m, const mf_build_params *p, mf_graph *g, mf_graph_io *io, mf_error *err);
/* The rope a context applies (rope_scaling.c): the file's values with p's overrides, resolved as llama.cpp's
 * context resolves them; a bad override is refused (MF_E_INVAL) naming it.  info may be NULL. */
int mf_model_rope(const mf_model *m, const mf_rope_params *p, mf_rope *rope, mf_rope_info *info, mf_error *err);

#endif
