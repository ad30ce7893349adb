/* kv: the KV cell store of one context.
 *
 * Per layer one K and one V region of n_cells cells (a cell = one row of n_embd_k / n_embd_v elements of
 * the region's element type: F32, F16 or Q8_0, chosen separately for K and V; a Q8_0 row is the bytes of
 * the reference quantizer, 34 bytes per 32 elements).  The graph sees each region as an EXTERNAL tensor
 * [n_embd_kv, n_cells]; KV_STORE writes the rows a batch resolves to, ATTENTION reads the windows.
 *
 * Cells belong to sequences; positions are sequence-relative.  A cell holds (seq, pos) or is free.
 * The store resolves each batch token to a free cell (lowest index first: deterministic) and produces,
 * for every query token, its window = the cells of the same sequence with pos <= the query's pos, in
 * position order.  Two sequences never see each other's rows.  seq_cp copies rows into new cells (no
 * sharing yet, so a store never writes through a shared cell).  seq_add moves positions and re-ropes the
 * moved K rows (the context shift). */
#ifndef MF_KV_H
#define MF_KV_H

#include "core/core.h"

typedef struct mf_kv mf_kv;

/* type_k, type_v: MF_TYPE_F32, MF_TYPE_F16 or MF_TYPE_Q8_0 (quant/quant.h ids; Q8_0 needs a row length
 * that is a multiple of 32).  Anything else is refused naming the type. */
int mf_kv_new(int32_t n_layer, int64_t n_embd_k, int64_t n_embd_v, int32_t n_cells, uint32_t type_k,
              uint32_t type_v, mf_kv **out, mf_error *err);
/* Is this a KV element type the store holds (f32, f16, q8_0)? */
bool mf_kv_type_ok(uint32_t type);
void mf_kv_free(mf_kv *kv);

int32_t mf_kv_n_cells(const mf_kv *kv);
int32_t mf_kv_n_used(const mf_kv *kv);
uint32_t mf_kv_type_k(const mf_kv *kv);
uint32_t mf_kv_type_v(const mf_kv *kv);
size_t mf_kv_row_bytes_k(const mf_kv *kv);
size_t mf_kv_row_bytes_v(const mf_kv *kv);
void *mf_kv_k(mf_kv *kv, int32_t layer); /* region [n_embd_k, n_cells] */
void *mf_kv_v(mf_kv *kv, int32_t layer);
size_t mf_kv_bytes(const mf_kv *kv); /* all regions together */

/* Cell metadata (tests, diagnostics): seq id or -1 when free, and the position. */
int32_t mf_kv_cell_seq(const mf_kv *kv, int32_t cell);
int32_t mf_kv_cell_pos(const mf_kv *kv, int32_t cell);

/* Sequence operations.  seq < 0 means every sequence; p0 < 0 means 0, p1 < 0 means +infinity. */
void mf_kv_clear(mf_kv *kv);
void mf_kv_seq_rm(mf_kv *kv, int32_t seq, int32_t p0, int32_t p1);
/* Copy the rows of src with p0 <= pos < p1 into new cells owned by dst (dst's rows in that range are
 * removed first).  Refused (nothing changed) when not enough free cells remain. */
int mf_kv_seq_cp(mf_kv *kv, int32_t src, int32_t dst, int32_t p0, int32_t p1, mf_error *err);
int32_t mf_kv_seq_pos_max(const mf_kv *kv, int32_t seq); /* -1 when the sequence holds no cell */
int32_t mf_kv_seq_n_cells(const mf_kv *kv, int32_t seq);

/* The model's rope, for re-roping K rows (core/rope.h): every K row is n_embd_k / head_dim heads. */
#define MF_KV_ROPE_MAX 1024 /* rotary dimensions a re-rope handles */
typedef struct {
    int32_t head_dim, n_rot, mode;
    float freq_base, freq_scale;
} mf_kv_rope;

/* Context shift: the cells of seq with p0 <= pos < p1 move to pos + delta, and their K rows are
 * re-roped by delta (a rotation by p then by delta is one by p + delta, up to rounding; V untouched).
 * A cell whose new position would be < 0 is removed.  Refused (nothing changed) when a moved cell
 * would land on a position seq keeps outside the range, or seq < 0. */
int mf_kv_seq_add(mf_kv *kv, int32_t seq, int32_t p0, int32_t p1, int32_t delta, const mf_kv_rope *rope,
                  mf_error *err);
/* Re-rope one K row of `type` (F32, F16: llama.cpp's cast to f32, rope, cast back; Q8_0: dequantize,
 * rope, requantize with the bytes KV_STORE writes) in place by delta.  tmp holds n_embd floats. */
int mf_kv_rope_row(uint32_t type, void *row, int64_t n_embd, int32_t delta, const mf_kv_rope *rope, float *tmp,
                   mf_error *err);

/* Resolve a batch: for each token t (seq[t], pos[t]) take a free cell (cells_out[t]) and fill the
 * window input: win is [win_stride, n_tok], column t = {count, cell ids in position order}, where
 * win_stride must be >= n_cells + 1 (unused entries are zeroed).  Tokens of the batch are visible to
 * later (higher position) tokens of the same sequence, as KV_STORE runs before ATTENTION.
 * Refused with nothing changed: a position already in the cache for that sequence (remove it first),
 * a duplicate (seq, pos) in the batch, a negative seq/pos, or too few free cells (both numbers). */
int mf_kv_prepare(mf_kv *kv, int32_t n_tok, const int32_t *pos, const int32_t *seq, int32_t *cells_out,
                  int32_t *win, int32_t win_stride, mf_error *err);
/* Give back the cells a prepare took (a failed forward): the cells become free again. */
void mf_kv_unprepare(mf_kv *kv, int32_t n_tok, const int32_t *cells);

/* Session files.  export: the cells of seq in position order (pos[i] at cells[i]), at most cap of them;
 * the count (-1 when out of memory).  import: take n free cells (lowest first) for seq at the strictly
 * rising positions pos (cells_out[i] gets pos[i]'s cell; the caller then writes the rows).  Refused with
 * nothing changed: too few free cells (both numbers), a sequence that already holds cells, bad positions. */
int32_t mf_kv_seq_export(const mf_kv *kv, int32_t seq, int32_t *pos, int32_t *cells, int32_t cap);
int mf_kv_seq_import(mf_kv *kv, int32_t seq, int32_t n, const int32_t *pos, int32_t *cells_out, mf_error *err);

#endif
