/* server/grammar: the GBNF text of a request's constraint (docs/SERVER.md "Structured output").  Each
 * function returns MF_E_* with err naming the problem; *out is malloc'd GBNF text whose start is `root`. */
#ifndef MF_SERVER_GRAMMAR_H
#define MF_SERVER_GRAMMAR_H

#include "minfer.h"

#include <stdbool.h>

/* A JSON Schema's JSON texts (response_format json_schema / json_object, llama-server's json_schema). */
int mf_srv_schema_gbnf(const char *schema, size_t len, char **out, mf_error *err);
/* Forced tool calls in Qwen's format: <tool_call>\n{"name": NAME, "arguments": ARGS}\n</tool_call>, ARGS
 * by that tool's parameters schema; several separated by a newline where parallel.  only: a function name
 * (tool_choice naming one), or NULL for any of the tools (tool_choice "required"). */
int mf_srv_tools_gbnf(char *const *tools, int32_t n_tools, const char *only, bool parallel, char **out,
                      mf_error *err);
/* gbnf after a reasoning model's thinking: up to four blanks, then gbnf's root. */
int mf_srv_think_gbnf(const char *gbnf, char **out, mf_error *err);

#endif
