/* server/toolcall: picks the tool calls out of a chat answer, as llama-server's Hermes-style parser does for
 * Qwen2.5 and Qwen3, while streaming.  The model writes each call as
 *     <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>
 * Text outside the calls stays content; the blanks before a call, between calls and after the last one
 * are dropped.  A call whose inside is not a JSON object with a string "name" and an "arguments" value, and a
 * call still open when the answer ends, stay content as written (the client sees what the model wrote).
 * Text that could still be the start of "<tool_call>" is held back until it is decided, so the streamed
 * deltas join to exactly the whole answer's content. */
#ifndef MF_SERVER_TOOLCALL_H
#define MF_SERVER_TOOLCALL_H

#include "server/think.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *name;
    char *arguments; /* JSON text as a Qwen model writes it (json.dumps: ", " and ": ") */
} mf_srv_tool_call;

typedef struct {
    bool in_call;
    bool single;      /* parallel_tool_calls false: calls after the first are dropped */
    mf_srv_buf hold;  /* undecided text: blanks and a possible tag start, or an open call */
    mf_srv_buf blank; /* blanks held while it is unknown whether a call follows */
    mf_srv_tool_call *calls;
    int32_t n_calls, cap_calls;
} mf_srv_tools;

/* Appends the decided content of s[0..n) to content; complete calls go to t->calls.  false: out of memory. */
bool mf_srv_tools_push(mf_srv_tools *t, const char *s, size_t n, mf_srv_buf *content);
/* End of the answer: held text goes out (an unfinished call as the text it is). */
bool mf_srv_tools_flush(mf_srv_tools *t, mf_srv_buf *content);
void mf_srv_tools_free(mf_srv_tools *t);

#endif
