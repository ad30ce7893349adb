# minfer — one library, thin front ends.  See README.md and docs/ARCHITECTURE.md.
#   make            libminfer.a, minfer, mf-genmodel, test binaries
#   make test       every test (tests/run.sh: "N passed, N failed, N skipped"; docs/TESTING.md)
#   make asan       the same tests under AddressSanitizer + UBSan (separate build dir)
#   make CUDA=1     also compile the CUDA backend with nvcc
#   make BUILD=dir  put every output under dir (parallel work trees share one checkout)
#   make fuzz       libFuzzer harnesses (clang, ASan + UBSan) in build-fuzz/, each run FUZZ_TIME seconds
#   make cross-test build for aarch64 with Debian's cross gcc and run every test under qemu-user
#                   (scripts/cross-test.sh; installs the toolchain on first use)
CC      ?= gcc
BUILD   ?= build
WERROR  ?= -Werror
OPT     ?= -O2
SAN     ?=
V       ?= 0
ifeq ($(V),0)
Q = @
else
Q =
endif
CFLAGS_BASE = -std=c11 -D_GNU_SOURCE -Wall -Wextra $(WERROR) -Wno-unused-parameter \
              -fno-strict-aliasing -g $(OPT) $(SAN) -pthread -Iinclude -Isrc
CFLAGS  += $(CFLAGS_BASE) $(shell pkg-config --cflags libpcre2-8 libutf8proc libcjson libmicrohttpd 2>/dev/null)
LDLIBS  += $(shell pkg-config --libs libpcre2-8 libutf8proc libcjson libmicrohttpd 2>/dev/null) -lm -pthread $(SAN)

# SIMD kernel files by target architecture (the compiler's, so CC=aarch64-linux-gnu-gcc cross-builds):
# the x86 ones (immintrin, cpuid) only for x86-64, the NEON ones only for aarch64, the scalar kernels
# everywhere (kernels.c lists each architecture's ISAs).
ARCH     ?= $(firstword $(subst -, ,$(shell $(CC) -dumpmachine)))
X86_SRC  := $(addprefix src/quant/,dot_avx2.c dot_avx512.c kernels_x86.c lowbit_avx2.c lowbit_avx512.c \
              tile_avx2.c tile_avx512.c x16_avx512.c x16_amx.c x8_amx.c x8_avx2.c x8_avx512.c)
X86_SRC  += $(addprefix src/quant/,dot_iq_avx2.c dot_iq_avx512.c float_avx512.c)
NEON_SRC := $(addprefix src/quant/,dot_neon.c kernels_neon.c lowbit_neon.c)
NEON_SRC += src/quant/dot_iq_neon.c
ifeq ($(ARCH),x86_64)
ARCH_OFF := $(NEON_SRC)
else ifeq ($(ARCH),aarch64)
ARCH_OFF := $(X86_SRC)
else
ARCH_OFF := $(X86_SRC) $(NEON_SRC)
endif
LIB_SRC  := $(filter-out $(ARCH_OFF),$(shell find src -name '*.c' -not -path 'src/cli/*' | sort))
CLI_SRC  := $(wildcard src/cli/*.c)
GEN_SRC  := $(wildcard tools/genmodel/*.c)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_HELPERS := $(wildcard tests/support/*.c)

ifeq ($(CUDA),1)
NVCC    ?= $(shell command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)
CU_SRC  := $(shell find src -name '*.cu' | sort)
CFLAGS  += -DMF_CUDA=1
LDLIBS  += -L/usr/local/cuda/lib64 -lcudart -lcublas -lstdc++
# sm_90 machine code (the H200) plus compute_90 PTX, which newer GPUs JIT-compile.  No --use_fast_math: it
# changes the math (flushed denormals, approximate division and exp) that the CPU reference pins.
NVCCFLAGS ?= -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
             -Xcompiler -Wall
else
CU_SRC  :=
endif

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(CU_SRC:%.cu=$(BUILD)/obj/%.cu.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
GEN_OBJ  := $(GEN_SRC:%.c=$(BUILD)/obj/%.o)
HELP_OBJ := $(TEST_HELPERS:%.c=$(BUILD)/obj/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

LIB := $(BUILD)/libminfer.a
BIN := $(BUILD)/minfer
GEN := $(BUILD)/mf-genmodel

.PHONY: all test test-full asan fuzz fuzz-build cross-test clean format
all: $(LIB) $(BIN) $(GEN) $(TEST_BIN)

# The generator's default tokenizer is the repository's own copy, by absolute path, so it runs from any
# working directory (a clone needs nothing outside itself).
$(GEN_OBJ): CFLAGS += -DMF_TOKENIZER_DEFAULT='"$(CURDIR)/tokenizers/qwen3"'

# The AMX tile kernels (gated at run time like every SIMD file: kernels_x86.c checks cpuid, XCR0 and the OS
# permission before anything there runs).
$(BUILD)/obj/src/quant/x16_amx.o $(BUILD)/obj/src/quant/x8_amx.o: CFLAGS += -mamx-tile -mamx-int8

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  NVCC    $<")
	$(Q)$(NVCC) $(NVCCFLAGS) -Iinclude -Isrc -DMF_CUDA=1 -MMD -MP -c $< -o $@

$(LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(BIN): $(CLI_OBJ) $(LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $(CLI_OBJ) $(LIB) $(LDLIBS)

$(GEN): $(GEN_OBJ) $(LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $(GEN_OBJ) $(LIB) $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(HELP_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) -MMD -MP -o $@ $< $(HELP_OBJ) $(LIB) $(LDLIBS)

# test_model makes every allocation of a model load fail in turn (out-of-memory reporting).
$(BUILD)/tests/test_model: LDLIBS += -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc

# The CI suite: tiny shapes, every golden, every CLI test.
test: all
	BUILD=$(BUILD) bash tests/run.sh

# Adds the Qwen2.5-0.5B / Qwen3-0.6B shaped end-to-end checks (minutes, GBs of RAM).
test-full: all
	BUILD=$(BUILD) MF_TEST_FULL=1 bash tests/run.sh

# -O1: at -O2 the suite ran ~1.4x faster under ASan (conformance 942 s against 1338 in CI), but building the
# intrinsics kernels with ASan at -O2 took ~5x longer, and the block as a whole more CPU (1770 s against 1294;
# CI 2026-12-02).
asan:
	$(MAKE) BUILD=$(BUILD)-asan OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" test

# ---- fuzzing (docs/FUZZING.md) ----
# The library is rebuilt with clang and the sanitizers in its own build dir (coverage instrumentation
# without libFuzzer's main); each tests/fuzz/fuzz_<name>.c links the fuzzer's main.  tests/fuzz/run.sh
# copies the committed seeds into a writable corpus under the build dir and fails on any report.
FUZZ_BUILD ?= build-fuzz
FUZZ_TIME  ?= 60
FUZZ_CC    ?= clang
FUZZ_SAN   := -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
FUZZ_SRC   := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN   := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)

fuzz:
	$(MAKE) BUILD=$(FUZZ_BUILD) CC=$(FUZZ_CC) OPT=-O1 SAN="$(FUZZ_SAN)" fuzz-build
	FUZZ_BUILD=$(FUZZ_BUILD) FUZZ_TIME=$(FUZZ_TIME) bash tests/fuzz/run.sh

fuzz-build: $(FUZZ_BIN)

# Every build also links each harness with tests/fuzz/replay.c instead of libFuzzer (any compiler):
# tests/cli/fuzz_seeds.sh replays the seed corpora with them in `make test` and `make asan`.
REPLAY_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz-replay/%)
all: $(REPLAY_BIN)

# extra objects a harness needs beyond the library: the CLI's argument parser, the generator's
# tokenizer.json reader (the tokenizer harness builds the real Qwen3 vocabulary with it)
$(BUILD)/fuzz/fuzz_args $(BUILD)/fuzz-replay/fuzz_args: $(BUILD)/obj/src/cli/args.o
$(BUILD)/fuzz/fuzz_tok $(BUILD)/fuzz-replay/fuzz_tok: $(BUILD)/obj/tools/genmodel/tokenizer.o
$(BUILD)/fuzz/fuzz_tok $(BUILD)/fuzz-replay/fuzz_tok: CFLAGS += -Itools/genmodel \
    -DMF_FUZZ_TOKENIZER_DIR='"$(CURDIR)/tokenizers/qwen3"'
# the embedding / rerank parsers' harness makes its model with the generator's library (all but its main)
$(BUILD)/fuzz/fuzz_embed $(BUILD)/fuzz-replay/fuzz_embed: $(filter-out %/main.o,$(GEN_OBJ))
$(BUILD)/fuzz/fuzz_embed $(BUILD)/fuzz-replay/fuzz_embed: CFLAGS += -Itools/genmodel \
    -DMF_FUZZ_TOKENIZER_DIR='"$(CURDIR)/tokenizers/qwen3"'

$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) -fsanitize=fuzzer -MMD -MP -o $@ $< $(filter %.o,$^) $(LIB) $(LDLIBS)

$(BUILD)/fuzz-replay/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/replay.c $(LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS) -MMD -MP -o $@ $< tests/fuzz/replay.c $(filter %.o,$^) $(LIB) $(LDLIBS)

# The whole suite for aarch64 under qemu-user (CROSS_BUILD=build-aarch64; see scripts/cross-test.sh).
cross-test:
	bash scripts/cross-test.sh

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(FUZZ_BUILD)

format:
	clang-format -i $$(find src include tests tools/genmodel -name '*.[ch]')

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
