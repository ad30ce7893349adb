/* model internals: the loading steps load.c runs and vocab.c implements. */
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

#endif
