/* Encoding: added-token partition, then per text segment UTF-8 repair, NFC, regex split and the
 * byte-level BPE merge loop (lowest rank first, leftmost on ties — as HF tokenizers and llama.cpp). */
#include "tok/tok_impl.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    uint32_t rank;
    int32_t left;   /* symbol index of the left side */
    int32_t lid;    /* ids at push time: the pair is stale when either changed */
    int32_t rid;
    int32_t right;
} cand;

typedef struct {
    int32_t id, prev, next;
} sym;

typedef struct {
    sym *syms;
    cand *heap;
    size_t cap_syms, cap_heap, n_heap;
    pcre2_match_data *md;
} scratch;

int mf_tok_ids_push(mf_tok_ids *o, int32_t id, mf_error *err) {
    if (o->n == o->cap) {
        size_t nc = o->cap ? o->cap * 2 : 64;
        int32_t *p = realloc(o->ids, nc * sizeof *p);
        if (!p) return mf_err(err, MF_E_NOMEM, "tokenizer: out of memory for %zu token ids", nc);
        o->ids = p;
        o->cap = nc;
    }
    o->ids[o->n++] = id;
    return 0;
}

static bool cand_less(const cand *a, const cand *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void heap_push(scratch *s, cand c) {
    size_t i = s->n_heap++;
    s->heap[i] = c;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&s->heap[i], &s->heap[p])) break;
        cand tmp = s->heap[i];
        s->heap[i] = s->heap[p];
        s->heap[p] = tmp;
        i = p;
    }
}

static cand heap_pop(scratch *s) {
    cand top = s->heap[0];
    s->heap[0] = s->heap[--s->n_heap];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < s->n_heap && cand_less(&s->heap[l], &s->heap[m])) m = l;
        if (r < s->n_heap && cand_less(&s->heap[r], &s->heap[m])) m = r;
        if (m == i) break;
        cand tmp = s->heap[i];
        s->heap[i] = s->heap[m];
        s->heap[m] = tmp;
        i = m;
    }
    return top;
}

static bool merge_lookup(const mf_tok *t, int32_t a, int32_t b, uint32_t *rank, int32_t *res) {
    uint64_t key = ((uint64_t)(uint32_t)(a + 1) << 32) | (uint32_t)(b + 1);
    uint64_t k = key;
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    uint32_t h = (uint32_t)k & t->m_mask;
    for (;;) {
        uint64_t v = t->mkey[h];
        if (!v) return false;
        if (v == key) {
            *rank = t->mrank[h];
            *res = t->mres[h];
            return true;
        }
        h = (h + 1) & t->m_mask;
    }
}

static void try_pair(const mf_tok *t, scratch *s, int32_t l) {
    int32_t r = s->syms[l].next;
    if (r < 0) return;
    uint32_t rank;
    int32_t res;
    if (merge_lookup(t, s->syms[l].id, s->syms[r].id, &rank, &res))
        heap_push(s, (cand){rank, l, s->syms[l].id, s->syms[r].id, r});
}

static int bpe_word(const mf_tok *t, scratch *s, const unsigned char *w, size_t n, mf_tok_ids *out, mf_error *err) {
    if (n == 1) return mf_tok_ids_push(out, t->byte_tok[w[0]], err);
    if (n > s->cap_syms) {
        sym *p = realloc(s->syms, n * sizeof *p);
        cand *h = realloc(s->heap, 3 * n * sizeof *h); /* n-1 initial pairs + <= 2 per merge */
        if (p) s->syms = p;
        if (h) s->heap = h;
        if (!p || !h) return mf_err(err, MF_E_NOMEM, "tokenizer: out of memory for a %zu-byte word", n);
        s->cap_syms = n;
        s->cap_heap = 3 * n;
    }
    for (size_t i = 0; i < n; i++) {
        s->syms[i].id = t->byte_tok[w[i]];
        s->syms[i].prev = (int32_t)i - 1;
        s->syms[i].next = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    s->n_heap = 0;
    for (size_t i = 0; i + 1 < n; i++) try_pair(t, s, (int32_t)i);
    while (s->n_heap) {
        cand c = heap_pop(s);
        sym *L = &s->syms[c.left];
        /* stale: the left symbol was merged away or grew, or its right neighbour changed */
        if (L->id != c.lid || L->next != c.right || s->syms[c.right].id != c.rid) continue;
        uint32_t rank;
        int32_t res;
        merge_lookup(t, c.lid, c.rid, &rank, &res);
        sym *R = &s->syms[c.right];
        L->id = res;
        L->next = R->next;
        if (R->next >= 0) s->syms[R->next].prev = c.left;
        R->id = -1; /* dead */
        if (L->prev >= 0) try_pair(t, s, L->prev);
        try_pair(t, s, c.left);
    }
    for (int32_t i = 0; i >= 0; i = s->syms[i].next) {
        int rc = mf_tok_ids_push(out, s->syms[i].id, err);
        if (rc) return rc;
    }
    return 0;
}

static int encode_segment(const mf_tok *t, scratch *s, const char *text, size_t len, mf_tok_ids *out,
                          mf_error *err) {
    if (!len) return 0;
    char *fixed = NULL, *nfc = NULL;
    size_t flen = 0, nlen = 0;
    int rc = mf_tok_utf8_sanitize(text, len, &fixed, &flen, err);
    if (rc) return rc;
    bool ascii = true;
    for (size_t i = 0; i < flen && ascii; i++) ascii = (unsigned char)fixed[i] < 0x80;
    const char *src = fixed;
    size_t slen = flen;
    if (!ascii) {
        if ((rc = mf_tok_nfc(fixed, flen, &nfc, &nlen, err))) goto done;
        src = nfc;
        slen = nlen;
    }
    if (!s->md && !(s->md = pcre2_match_data_create_from_pattern(t->re, NULL))) {
        rc = mf_err(err, MF_E_NOMEM, "tokenizer: out of memory for regex match data");
        goto done;
    }
    size_t at = 0;
    while (at < slen) {
        int m = pcre2_match(t->re, (PCRE2_SPTR)src, slen, at, PCRE2_NO_UTF_CHECK, s->md, NULL);
        if (m == PCRE2_ERROR_JIT_STACKLIMIT) /* the interpreter finds the same match without that limit */
            m = pcre2_match(t->re, (PCRE2_SPTR)src, slen, at, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, s->md, NULL);
        size_t ms, me;
        if (m == PCRE2_ERROR_NOMATCH) {
            ms = me = slen;
        } else if (m < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(m, msg, sizeof msg);
            rc = mf_err(err, MF_E_INTERNAL, "tokenizer: pre-tokenizer regex failed at byte %zu of %zu: %s", at, slen,
                        (const char *)msg);
            goto done;
        } else {
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
            ms = ov[0];
            me = ov[1];
        }
        if (ms > at && (rc = bpe_word(t, s, (const unsigned char *)src + at, ms - at, out, err))) goto done;
        if (me == ms) { /* no match left (or an empty one): the rest was the gap */
            if (me >= slen) break;
            me = ms + 1;
            while (me < slen && ((unsigned char)src[me] & 0xC0) == 0x80) me++;
        }
        if ((rc = bpe_word(t, s, (const unsigned char *)src + ms, me - ms, out, err))) goto done;
        at = me;
    }
done:
    free(fixed);
    free(nfc);
    return rc;
}

int mf_tok_encode(const mf_tok *t, const char *text, size_t len, unsigned flags, mf_tok_ids *out, mf_error *err) {
    int rc = 0;
    scratch s;
    memset(&s, 0, sizeof s);
    if ((flags & MF_TOK_ADD_BOS) && t->add_bos && (rc = mf_tok_ids_push(out, t->bos, err))) return rc;
    const bool parse_special = flags & MF_TOK_PARSE_SPECIAL;
    size_t seg = 0, pos = 0;
    while (pos < len) {
        unsigned char c = (unsigned char)text[pos];
        int32_t hit = -1;
        for (int32_t k = t->added_first[c]; k < t->added_first[c + 1]; k++) {
            int32_t id = t->added[k];
            if (!parse_special && t->type[id] == MF_TOKT_CONTROL) continue;
            uint32_t tl = t->text_len[id];
            if (tl <= len - pos && !memcmp(text + pos, t->text_blob + t->text_off[id], tl)) {
                hit = id; /* bucket is longest first */
                break;
            }
        }
        if (hit < 0) {
            pos++;
            continue;
        }
        if ((rc = encode_segment(t, &s, text + seg, pos - seg, out, err))) goto done;
        if ((rc = mf_tok_ids_push(out, hit, err))) goto done;
        pos += t->text_len[hit];
        seg = pos;
    }
    rc = encode_segment(t, &s, text + seg, len - seg, out, err);
    if (!rc && (flags & MF_TOK_ADD_BOS) && t->add_eos) rc = mf_tok_ids_push(out, t->eos, err); /* llama.cpp: after all */
done:
    free(s.syms);
    free(s.heap);
    if (s.md) pcre2_match_data_free(s.md);
    return rc;
}
