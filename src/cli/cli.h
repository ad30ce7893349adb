/* The minfer command line: one file per subcommand, all through the public API and module headers.
 * A subcommand returns the process exit status (0 ok, 1 runtime error, 2 usage error). */
#ifndef MF_CLI_H
#define MF_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

int mf_cmd_info(int argc, char **argv);
int mf_cmd_tokenize(int argc, char **argv);
int mf_cmd_run(int argc, char **argv);
int mf_cmd_eval(int argc, char **argv);
int mf_cmd_viz(int argc, char **argv);
int mf_cmd_bench(int argc, char **argv);
int mf_cmd_backends(int argc, char **argv);

/* Shared argument helpers: print "Error: ..." naming the flag and value, return false on bad input. */
bool mf_arg_int(const char *flag, const char *val, long min, long max, long *out);
bool mf_arg_float(const char *flag, const char *val, double *out);
/* argv[*i] is `flag`; fetch its value (argv[*i+1]) or print "Error: FLAG needs a value". */
const char *mf_arg_value(int argc, char **argv, int *i);
/* --tokens: a JSON array of non-negative int32 ids; *out malloc'd (free() it).  Prints the error. */
bool mf_arg_token_ids(const char *flag, const char *s, int32_t **out, int32_t *n);
/* Reads a whole file (binary-exact). Returns malloc'd buffer (NUL-terminated) or NULL with an error printed. */
char *mf_read_file(const char *path, size_t *len);

#endif
