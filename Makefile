# minfer — one library, thin front ends.  See README.md and docs/ARCHITECTURE.md.
#   make            libminfer.a, minfer, mf-genmodel, test binaries
#   make test       every test (tests/run.sh: "N passed, N failed, N skipped"; docs/TESTING.md)
#   make asan       the same tests under AddressSanitizer + UBSan (separate build dir)
#   make CUDA=1     also compile the CUDA backend with nvcc
#   make BUILD=dir  put every output under dir (parallel work trees share one checkout)
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
CFLAGS  += $(CFLAGS_BASE) $(shell pkg-config --cflags libpcre2-8 libutf8proc libcjson 2>/dev/null)
LDLIBS  += $(shell pkg-config --libs libpcre2-8 libutf8proc libcjson 2>/dev/null) -lm -pthread $(SAN)

LIB_SRC  := $(shell find src -name '*.c' -not -path 'src/cli/*' | sort)
CLI_SRC  := $(wildcard src/cli/*.c)
GEN_SRC  := $(wildcard tools/genmodel/*.c)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_HELPERS := $(wildcard tests/support/*.c)

ifeq ($(CUDA),1)
NVCC    ?= $(shell command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)
CU_SRC  := $(shell find src -name '*.cu' | sort)
CFLAGS  += -DMF_CUDA=1
LDLIBS  += -L/usr/local/cuda/lib64 -lcudart -lcublas -lstdc++
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

.PHONY: all test test-full asan clean format
all: $(LIB) $(BIN) $(GEN) $(TEST_BIN)

# The generator's default tokenizer is the repository's own copy, by absolute path, so it runs from any
# working directory (a clone needs nothing outside itself).
$(GEN_OBJ): CFLAGS += -DMF_TOKENIZER_DEFAULT='"$(CURDIR)/tokenizers/qwen3"'

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  NVCC    $<")
	$(Q)$(NVCC) -O2 -std=c++17 -Iinclude -Isrc -DMF_CUDA=1 -c $< -o $@

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

# The CI suite: tiny shapes, every golden, every CLI test.
test: all
	BUILD=$(BUILD) bash tests/run.sh

# Adds the Qwen2.5-0.5B / Qwen3-0.6B shaped end-to-end checks (minutes, GBs of RAM).
test-full: all
	BUILD=$(BUILD) MF_TEST_FULL=1 bash tests/run.sh

asan:
	$(MAKE) BUILD=$(BUILD)-asan OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" test

clean:
	rm -rf $(BUILD) $(BUILD)-asan

format:
	clang-format -i $$(find src include tests tools/genmodel -name '*.[ch]')

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
