/* model internals: the loading steps load.c runs and vocab.c and load_repack.c implement. */
#ifndef MF_MODEL_IMPL_H
#define MF_MODEL_IMPL_H

#include "model/model.h"

/* The vocabulary size: tokenizer.ggml.tokens' count when the file has one, else token_embd's rows.
 * token_embd and output (when present) must have exactly that many rows; a disagreement names the
 * tensor, its row count and the vocabulary's (MF_E_FORMAT). */
int mf_model_vocab_size(const mf_gguf *g, int32_t *n_vocab, mf_error *err);
/* The tokenizer (m->tok, or NULL and the reason in m->tok_why; MF_E_NOMEM fails) and the one
 * end-of-generation list (m->bos, m->eos, m->eog).  Needs m->hp.n_vocab. */
int mf_model_load_vocab(mf_model *m, mf_error *err);
/* Copy the matmul weights the CPU runs into one buffer of huge pages (m->copies, m->repack_buf): in their
 * x8/x16 layout where they have one, the others as they are where the kernel gives huge pages; on n_threads
 * threads (<= 1: the caller alone).  Points the layers at the copies, releases the originals' file pages,
 * logs what it did at info. */
int mf_model_repack(mf_model *m, int n_threads, mf_error *err);

#endif
