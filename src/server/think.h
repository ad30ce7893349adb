/* server/think: splits a chat reply into Qwen3's thinking and the answer, as llama-server does, while
 * streaming: a reply that starts (after blanks) with <think> sends everything up to </think> to
 * `reasoning_content`, the rest (leading blanks dropped) to `content`.  Text that could still be the
 * start of a tag is held back until it is decided. */
#ifndef MF_SERVER_THINK_H
#define MF_SERVER_THINK_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char *s;
    size_t n, cap;
} mf_srv_buf;

bool mf_srv_buf_add(mf_srv_buf *b, const char *s, size_t n);
void mf_srv_buf_free(mf_srv_buf *b);
/* Drops the first k bytes of b. */
void mf_srv_buf_take(mf_srv_buf *b, size_t k);
/* Length of the longest suffix of s[0..n) that is a proper prefix of tag: text a splitter holds back. */
size_t mf_srv_partial_tag(const char *s, size_t n, const char *tag);

typedef struct {
    int state; /* 0 undecided, 1 thinking, 2 answer start (blanks dropped), 3 answer */
    mf_srv_buf hold;
} mf_srv_think;

/* Appends the decided part of s[0..n) to content / reasoning.  false: out of memory. */
bool mf_srv_think_push(mf_srv_think *t, const char *s, size_t n, mf_srv_buf *content, mf_srv_buf *reasoning);
/* End of the reply: whatever is held goes out (an unfinished thought stays reasoning). */
bool mf_srv_think_flush(mf_srv_think *t, mf_srv_buf *content, mf_srv_buf *reasoning);
void mf_srv_think_free(mf_srv_think *t);

#endif
