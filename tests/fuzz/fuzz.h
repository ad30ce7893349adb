/* Shared by the libFuzzer harnesses (tests/fuzz/fuzz_<name>.c, docs/FUZZING.md). */
#ifndef MF_FUZZ_H
#define MF_FUZZ_H

#include <sanitizer/common_interface_defs.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A property the code promises does not hold: say which (through the sanitizers' report channel, which
 * stays open when run.sh closes the code's stderr with -close_fd_mask=2) and stop as a crash, so
 * libFuzzer keeps the input as a reproducer. */
#define FAIL_IF(cond)                                                                                              \
    do {                                                                                                           \
        if (cond) {                                                                                                \
            char mf_fuzz_msg_[512];                                                                                \
            snprintf(mf_fuzz_msg_, sizeof mf_fuzz_msg_, "property failed: %s:%d: %s", __FILE__, __LINE__, #cond); \
            __sanitizer_report_error_summary(mf_fuzz_msg_);                                                        \
            __builtin_trap();                                                                                      \
        }                                                                                                          \
    } while (0)

#endif
