/* kv: the KV cell store of one context.
 *
 * Per layer one K and one V region of n_cells cells (a cell = one row of n_embd_k / n_embd_v elements of
 * the region's element type: F32, F16 or Q8_0, chosen separately for K and V; a Q8_0 row is the bytes of
 * the reference quantizer, 34 bytes per 32 elements).  The graph sees each region as an EXTERNAL tensor
 * [n_embd_kv, n_cells]; KV_STORE writes the rows a batch resolves to, ATTENTION reads the spans.
 *
 * Cells belong to sequences; positions are sequence-relative.  Each sequence keeps a list of its cells
 * in position order; a cell may be in several lists (seq_cp shares by reference: no byte is copied)
 * and holds one position for all of them.  A batch token takes a free cell (lowest index first:
 * deterministic), so a store never writes through a shared cell; the only other write, seq_add's
 * re-rope, gives a sharer its own copy first (copy-on-write).  Two sequences see each other's rows only
 * where they share cells (the same rows, at the same positions).
 *
 * The window of a query (seq, pos) is the cells of its sequence with position <= pos, in position order:
 * a prefix of the sequence's list.  mf_kv_prepare writes the spans the ATTENTION op reads (graph.h):
 *   spans[0] = total int32 entries, spans[1] = n_tok, spans[2 + 2t] = offset, spans[3 + 2t] = count:
 *   query t sees the cells spans[offset .. offset + count), each batch sequence's list copied once.
 * Preparing a batch costs O(log n_cells) per token plus the lists of the batch's sequences: the cells
 * attended, never the context size. */
#ifndef MF_KV_H
#define MF_KV_H

#include "core/core.h"
#include "core/rope.h"

typedef struct mf_kv mf_kv;

/* type_k, type_v: MF_TYPE_F32, MF_TYPE_F16 or MF_TYPE_Q8_0 (quant/quant.h ids; Q8_0 needs a row length
 * that is a multiple of 32).  Anything else is refused naming the type. */
int mf_kv_new(int32_t n_layer, int64_t n_embd_k, int64_t n_embd_v, int32_t n_cells, uint32_t type_k,
              uint32_t type_v, mf_kv **out, mf_error *err);
/* Where the rows live.  mf_kv_new keeps every layer's K and V regions in one host block.  With
 * mf_kv_new_placed each layer's two regions come from the caller's memory hooks (the engine hands the
 * buffer hooks of the backend that runs the layer): the store keeps the cell bookkeeping on the host
 * and never dereferences such a region unless is_host says it may; rows move through read / write
 * (the context shift's copy-on-write and re-rope, session files: mf_kv_read_row / mf_kv_write_row).
 * alloc must zero-fill.  `user` is passed back to every hook. */
typedef struct mf_kv_mem {
    void *user;
    bool (*is_host)(void *user, int32_t layer);
    int (*alloc)(void *user, int32_t layer, size_t bytes, void **addr, mf_error *err);
    void (*free)(void *user, int32_t layer, void *addr);
    int (*read)(void *user, int32_t layer, const void *addr, void *dst, size_t n, mf_error *err);
    int (*write)(void *user, int32_t layer, void *addr, const void *src, size_t n, mf_error *err);
} mf_kv_mem;
int mf_kv_new_placed(int32_t n_layer, int64_t n_embd_k, int64_t n_embd_v, int32_t n_cells, uint32_t type_k,
                     uint32_t type_v, const mf_kv_mem *mem, mf_kv **out, mf_error *err);
/* One row (cell) of layer's K (v false) or V region, to or from host memory, whatever memory holds it. */
int mf_kv_read_row(const mf_kv *kv, int32_t layer, bool v, int32_t cell, void *dst, mf_error *err);
int mf_kv_write_row(mf_kv *kv, int32_t layer, bool v, int32_t cell, const void *src, mf_error *err);
/* Is this a KV element type the store holds (f32, f16, q8_0)? */
bool mf_kv_type_ok(uint32_t type);
void mf_kv_free(mf_kv *kv);

int32_t mf_kv_n_cells(const mf_kv *kv);
int32_t mf_kv_n_used(const mf_kv *kv);
uint32_t mf_kv_type_k(const mf_kv *kv);
uint32_t mf_kv_type_v(const mf_kv *kv);
size_t mf_kv_row_bytes_k(const mf_kv *kv);
size_t mf_kv_row_bytes_v(const mf_kv *kv);
/* region [n_embd_k, n_cells]: an address of the memory that holds it (a host pointer only for host memory) */
void *mf_kv_k(mf_kv *kv, int32_t layer);
void *mf_kv_v(mf_kv *kv, int32_t layer);
size_t mf_kv_bytes(const mf_kv *kv); /* all regions together */

/* Cell metadata (tests, diagnostics, session files): the position (-1 when free), how many sequences hold
 * the cell (0 = free), whether seq holds it, and the lowest sequence id that holds it (-1 when free;
 * scans the sequences). */
int32_t mf_kv_cell_pos(const mf_kv *kv, int32_t cell);
int32_t mf_kv_cell_refs(const mf_kv *kv, int32_t cell);
bool mf_kv_cell_in_seq(const mf_kv *kv, int32_t cell, int32_t seq);
int32_t mf_kv_cell_seq(const mf_kv *kv, int32_t cell);

/* Sequence operations.  seq < 0 means every sequence; p0 < 0 means 0, p1 < 0 means +infinity. */
void mf_kv_clear(mf_kv *kv);
void mf_kv_seq_rm(mf_kv *kv, int32_t seq, int32_t p0, int32_t p1);
/* seq_rm on a shared cell drops only seq's reference; the cell is free when no sequence holds it. */
/* dst shares src's cells with p0 <= pos < p1 (dst's own cells in that range are removed first): no
 * free cell is taken and no row copied.  Refused only for sequence ids < 0 (or out of memory). */
int mf_kv_seq_cp(mf_kv *kv, int32_t src, int32_t dst, int32_t p0, int32_t p1, mf_error *err);
int32_t mf_kv_seq_pos_max(const mf_kv *kv, int32_t seq); /* -1 when the sequence holds no cell */
/* Cells seq holds, shared ones included (so the sum over sequences may exceed mf_kv_n_used, which counts
 * distinct cells). */
int32_t mf_kv_seq_n_cells(const mf_kv *kv, int32_t seq);
/* The cells seq holds, in position order (*n of them; NULL when none); valid until the next change. */
const int32_t *mf_kv_seq_cells(const mf_kv *kv, int32_t seq, int32_t *n);

/* The model's rope, for re-roping K rows (core/rope.h): every K row is n_embd_k / head_dim heads. */
#define MF_KV_ROPE_MAX 1024 /* rotary dimensions a re-rope handles */
typedef struct {
    int32_t head_dim;
    mf_rope rope; /* the graph's rope; the shift rotates by the delta without its magnitude scale (core/rope.h) */
    int32_t rot;  /* K rows hold H_rot-rotated heads (core/hadamard.h, quantized K only): 0 = not rotated */
} mf_kv_rope;

/* Context shift: the cells of seq with p0 <= pos < p1 move to pos + delta, and their K rows are
 * re-roped by delta (a rotation by p then by delta is one by p + delta, up to rounding; V untouched).
 * A cell whose new position would be < 0 is removed.  A moved cell shared with other sequences is
 * copied into a free cell first (they keep theirs).  Refused (nothing changed) when a moved cell would
 * land on a position seq keeps outside the range, when the copies find too few free cells, or seq < 0. */
int mf_kv_seq_add(mf_kv *kv, int32_t seq, int32_t p0, int32_t p1, int32_t delta, const mf_kv_rope *rope,
                  mf_error *err);
/* Re-rope one K row of `type` (F32, F16: llama.cpp's cast to f32, rope, cast back; Q8_0: dequantize,
 * rope, requantize with the bytes KV_STORE writes) in place by delta.  With rope->rot the row is rotated
 * back before the rope and forward after it (llama.cpp's build_rope_shift).  tmp holds n_embd floats. */
int mf_kv_rope_row(uint32_t type, void *row, int64_t n_embd, int32_t delta, const mf_kv_rope *rope, float *tmp,
                   mf_error *err);

/* Resolve a batch: for each token t (seq[t], pos[t]) take a free cell (cells_out[t]) and add it to its
 * sequence's list; with spans, write the spans (above) for the batch, readable via mf_kv_spans until the
 * next prepare.  Tokens of the batch are visible to later (higher position) tokens of the same
 * sequence, as KV_STORE runs before ATTENTION.  Refused with nothing changed: a position already in the
 * cache for that sequence (remove it first), a duplicate (seq, pos) in the batch, a negative seq/pos, or
 * too few free cells (both numbers). */
int mf_kv_prepare(mf_kv *kv, int32_t n_tok, const int32_t *pos, const int32_t *seq, int32_t *cells_out, bool spans,
                  mf_error *err);
/* Give back the cells a prepare took (a failed forward): out of the sequences' lists, free again. */
void mf_kv_unprepare(mf_kv *kv, int32_t n_tok, const int32_t *seq, const int32_t *cells);
/* The spans buffer (moves when it grows: bind it after each prepare). */
int32_t *mf_kv_spans(mf_kv *kv);
/* List entries the last prepare wrote or moved (tests: the work follows the cells attended). */
int64_t mf_kv_prepare_work(const mf_kv *kv);

/* Session files.  export: seq's own cell list in position order (pos[i] at cells[i]; cells it shares
 * with other sequences included), at most cap of them; the count.  import: take n free cells (lowest
 * first, never a shared one) for seq at the strictly rising positions pos (cells_out[i] gets pos[i]'s
 * cell; the caller then writes the rows).  Refused with
 * nothing changed: too few free cells (both numbers), a sequence that already holds cells, bad positions. */
int32_t mf_kv_seq_export(const mf_kv *kv, int32_t seq, int32_t *pos, int32_t *cells, int32_t cap);
int mf_kv_seq_import(mf_kv *kv, int32_t seq, int32_t n, const int32_t *pos, int32_t *cells_out, mf_error *err);

#endif
