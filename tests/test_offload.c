/* The offload plan (model/offload.h) as the pure function it is: block counts, all, auto at several memory
 * sizes, the MINFER_GPU_MEM override, unknown and failed memory queries, plans that do not fit, and the
 * report line's words. */
#include "harness.h"

#include "model/offload.h"

#define MIB (1024ull * 1024ull)

enum { NL = 24 };
static uint64_t k_blocks[NL];

/* 24 blocks of 8 MiB, embeddings/output 40 MiB (the shape of the reference's 0.5B example, scaled) */
static mf_offload_in base(int32_t request, const char *origin) {
    for (int i = 0; i < NL; i++) k_blocks[i] = 8 * MIB;
    mf_offload_in in = {.request = request, .origin = origin, .device = "cuda", .n_layer = NL, .block_bytes = k_blocks,
                        .io_bytes = 40 * MIB};
    in.mem.outcome = MF_MEM_KNOWN;
    in.mem.free_bytes = 100000 * MIB;
    in.mem.total_bytes = 141000 * MIB;
    return in;
}

static void test_counts(void) {
    mf_error err = {0};
    mf_offload_plan p;
    mf_offload_in in = base(0, "--gpu-layers 0");
    REQUIRE_OK(mf_offload_make_plan(&in, &p, &err), "%s", err.msg);
    CHECK(p.n_gpu == 0 && !p.io_gpu && p.device_bytes == 0, "0: %d %d", p.n_gpu, p.io_gpu);
    CHECK(!strcmp(p.report, "offload: cpu only - 0 of 24 blocks on cuda (--gpu-layers 0)"), "%s", p.report);

    in = base(20, "--gpu-layers 20");
    REQUIRE_OK(mf_offload_make_plan(&in, &p, &err), "%s", err.msg);
    CHECK(p.n_gpu == 20 && !p.io_gpu && p.device_bytes == 160 * MIB, "20: %d %d %llu", p.n_gpu, p.io_gpu,
          (unsigned long long)p.device_bytes);
    CHECK(!strcmp(p.report, "offload: 20 of 24 blocks on cuda, 4 on cpu; embed/output on cpu (160.0 MiB of device "
                            "weights; within the 56250.0 MiB weights budget; --gpu-layers 20)"),
          "%s", p.report);

    /* every block: the embeddings/output go too (and count) */
    in = base(24, "-ngl 24");
    REQUIRE_OK(mf_offload_make_plan(&in, &p, &err), "%s", err.msg);
    CHECK(p.n_gpu == 24 && p.io_gpu && p.device_bytes == (192 + 40) * MIB, "24: %d %d %llu", p.n_gpu, p.io_gpu,
          (unsigned long long)p.device_bytes);
    CHECK(strstr(p.report, "offload: 24 of 24 blocks on cuda, 0 on cpu; embed/output on cuda (232.0 MiB"), "%s", p.report);
    in = base(23, "-ngl 23");
    REQUIRE_OK(mf_offload_make_plan(&in, &p, &err), "%s", err.msg);
    CHECK(p.n_gpu == 23 && !p.io_gpu, "23: %d %d", p.n_gpu, p.io_gpu);

    /* all and a count above the block count (llama.cpp's -ngl 999) */
    const int32_t reqs[] = {MF_GPU_LAYERS_ALL, 999, 25};
    for (size_t k = 0; k < MF_ARRAY_LEN(reqs); k++) {
        in = base(reqs[k], NULL);
        REQUIRE_OK(mf_offload_make_plan(&in, &p, &err), "%s", err.msg);
        CHECK(p.n_gpu == 24 && p.io_gpu && p.device_bytes == 232 * MIB, "request %d: %d %d", reqs[k], p.n_gpu, p.io_gpu);
    }
    CHECK(strstr(p.report, "; n_gpu_layers 25)"), "no origin: %s", p.report);

    /* bad requests */
    in = base(-3, "--gpu-layers -3");
    CHECK(mf_offload_make_plan(&in, &p, &err) == MF_E_INVAL &&
              strstr(err.msg, "--gpu-layers -3 is not a block count: give 0..24 blocks, all, or auto"),
          "%s", err.msg);
}

/* auto: the largest prefix that fits three quarters of the budget (a quarter reserved) */
static void test_auto(void) {
    mf_error err = {0};
    mf_offload_plan p;
    /* MINFER_GPU_MEM=64: budget 64, reserve 16, weights 48 -> 6 blocks of 8 */
    mf_offload_in in = base(MF_GPU_LAYERS_AUTO, "--gpu-layers auto");
    in.mem_override_mib = 64;
    REQUIRE_OK(mf_offload_make_plan(&in, &p, &err), "%s", err.msg);
    CHECK(p.n_gpu == 6 && !p.io_gpu && p.device_bytes == 48 * MIB, "64 MiB: %d %d", p.n_gpu, p.io_gpu);
    CHECK(p.budget == 64 * MIB && p.reserve == 16 * MIB && p.weights_budget == 48 * MIB, "budget %llu %llu %llu",
          (unsigned long long)p.budget, (unsigned long long)p.reserve, (unsigned long long)p.weights_budget);
    CHECK(!strcmp(p.report, "offload: 6 of 24 blocks on cuda, 18 on cpu; embed/output on cpu (48.0 MiB of device "
                            "weights; auto: 6 of 24 blocks fit - weights budget 48.0 MiB, 16.0 MiB reserved for "
                            "KV/activations; MINFER_GPU_MEM=64 MiB; --gpu-layers auto)"),
          "%s", p.report);

    /* every block fits, the embeddings/output do not: one block fewer (every block means the io too) */
    in.mem_override_mib = 256; /* weights budget 192 = 24 x 8 exactly */
    REQUIRE_OK(mf_offload_make_plan(&in, &p, &err), "%s", err.msg);
    CHECK(p.n_gpu == 23 && !p.io_gpu, "256 MiB: %d %d", p.n_gpu, p.io_gpu);
    in.mem_override_mib = 310; /* weights budget 232.5 >= 192 + 40 */
    REQUIRE_OK(mf_offload_make_plan(&in, &p, &err), "%s", err.msg);
    CHECK(p.n_gpu == 24 && p.io_gpu && p.device_bytes == 232 * MIB, "310 MiB: %d %d", p.n_gpu, p.io_gpu);

    /* embeddings/output smaller than a block: they fit where the next block does not, and still stay on the
     * CPU while any block does (weights budget 52.5: 6 blocks = 48, a 7th = 56, 48 + 4 of io would fit) */
    in.io_bytes = 4 * MIB;
    in.mem_override_mib = 70;
    REQUIRE_OK(mf_offload_make_plan(&in, &p, &err), "%s", err.msg);
    CHECK(p.n_gpu == 6 && !p.io_gpu && p.device_bytes == 48 * MIB, "small io, 70 MiB: %d blocks, io %d", p.n_gpu,
          p.io_gpu);
    in.io_bytes = 40 * MIB;

    /* the device's answer: three quarters of free memory is the budget; several sizes, the invariants */
    in.mem_override_mib = 0;
    int32_t prev = -1;
    for (uint64_t free_mib = 0; free_mib <= 420; free_mib += 7) {
        in.mem.free_bytes = free_mib * MIB;
        REQUIRE_OK(mf_offload_make_plan(&in, &p, &err), "free %llu: %s", (unsigned long long)free_mib, err.msg);
        CHECK(p.budget == in.mem.free_bytes / 4 * 3, "free %llu: budget %llu", (unsigned long long)free_mib,
              (unsigned long long)p.budget);
        CHECK(p.reserve + p.device_bytes <= p.budget, "free %llu: over budget", (unsigned long long)free_mib);
        /* maximal: one more block (or the io with the last) would not fit */
        const uint64_t next = p.n_gpu < NL - 1 ? 8 * MIB : p.n_gpu == NL - 1 ? 8 * MIB + 40 * MIB : 0;
        if (!p.io_gpu) CHECK(p.device_bytes + next > p.weights_budget, "free %llu: %d blocks is not the most",
                             (unsigned long long)free_mib, p.n_gpu);
        CHECK(p.io_gpu == (p.n_gpu == NL), "free %llu: io %d with %d blocks", (unsigned long long)free_mib, p.io_gpu,
              p.n_gpu);
        CHECK(p.n_gpu >= prev, "free %llu: %d after %d (more memory, fewer blocks)", (unsigned long long)free_mib,
              p.n_gpu, prev);
        prev = p.n_gpu;
    }
    CHECK(prev == NL, "420 MiB free (a weights budget of 236.25) fits everything, got %d", prev);
    in.mem.free_bytes = 1000 * MIB;
    REQUIRE_OK(mf_offload_make_plan(&in, &p, &err), "%s", err.msg);
    CHECK(strstr(p.report, "auto: 24 of 24 blocks fit - weights budget 562.5 MiB, 187.5 MiB reserved for "
                           "KV/activations; three quarters of the 1000.0 MiB cuda reports free of 141000.0 MiB"),
          "%s", p.report);
    /* the override wins over the device's answer */
    in.mem_override_mib = 64;
    REQUIRE_OK(mf_offload_make_plan(&in, &p, &err), "%s", err.msg);
    CHECK(p.n_gpu == 6, "override over 1000 MiB free: %d", p.n_gpu);
    /* nothing fits: a CPU plan, said so */
    in.mem_override_mib = 8;
    REQUIRE_OK(mf_offload_make_plan(&in, &p, &err), "%s", err.msg);
    CHECK(p.n_gpu == 0 && strstr(p.report, "offload: cpu only - 0 of 24 blocks on cuda (auto: 0 of 24 blocks fit"),
          "%s", p.report);
}

static void test_unknown_and_failed(void) {
    mf_error err = {0};
    mf_offload_plan p;
    mf_offload_in in = base(MF_GPU_LAYERS_AUTO, "--gpu-layers auto");
    in.mem.outcome = MF_MEM_UNKNOWN;
    snprintf(in.mem.why, sizeof in.mem.why, "the CUDA device reports no memory size");
    CHECK(mf_offload_make_plan(&in, &p, &err) == MF_E_UNSUPPORTED &&
              strstr(err.msg, "--gpu-layers auto needs the free memory of cuda, which is unknown (the CUDA device "
                              "reports no memory size); set MINFER_GPU_MEM=<MiB>"),
          "unknown: %s", err.msg);
    in.mem.outcome = MF_MEM_FAILED;
    snprintf(in.mem.why, sizeof in.mem.why, "cudaErrorIllegalAddress (700)");
    CHECK(mf_offload_make_plan(&in, &p, &err) == MF_E_UNSUPPORTED &&
              strstr(err.msg, "the device free-memory query failed with cudaErrorIllegalAddress (700); set "
                              "MINFER_GPU_MEM=<MiB>"),
          "failed: %s", err.msg);
    /* MINFER_GPU_MEM is the way out of both */
    in.mem_override_mib = 64;
    REQUIRE_OK(mf_offload_make_plan(&in, &p, &err), "%s", err.msg);
    CHECK(p.n_gpu == 6, "failed + override: %d", p.n_gpu);
    /* a count is taken unchecked, and the report says so */
    in = base(4, "--gpu-layers 4");
    in.mem.outcome = MF_MEM_FAILED;
    snprintf(in.mem.why, sizeof in.mem.why, "cudaErrorIllegalAddress (700)");
    REQUIRE_OK(mf_offload_make_plan(&in, &p, &err), "%s", err.msg);
    CHECK(p.n_gpu == 4 && !strcmp(p.report, "offload: 4 of 24 blocks on cuda, 20 on cpu; embed/output on cpu (32.0 MiB "
                                            "of device weights; not checked against device memory: the free-memory "
                                            "query failed with cudaErrorIllegalAddress (700); --gpu-layers 4)"),
          "%s", p.report);
    in.mem.outcome = MF_MEM_UNKNOWN;
    in.mem.why[0] = 0;
    in.request = 100000;
    REQUIRE_OK(mf_offload_make_plan(&in, &p, &err), "%s", err.msg);
    CHECK(p.n_gpu == 24 && p.io_gpu && strstr(p.report, "not checked against device memory: unknown"), "%s", p.report);
}

static void test_refusals(void) {
    mf_error err = {0};
    mf_offload_plan p;
    /* a count that does not fit: the numbers and the largest count that does */
    mf_offload_in in = base(20, "--gpu-layers 20");
    in.mem_override_mib = 64;
    CHECK(mf_offload_make_plan(&in, &p, &err) == MF_E_RANGE &&
              strstr(err.msg, "--gpu-layers 20 puts 160.0 MiB of weights on cuda (20 of 24 blocks), more than its "
                              "weights budget of 48.0 MiB (MINFER_GPU_MEM=64 MiB, less 16.0 MiB reserved for "
                              "KV/activations); --gpu-layers 6 fits"),
          "%s", err.msg);
    in.request = 6;
    REQUIRE_OK(mf_offload_make_plan(&in, &p, &err), "the suggested count: %s", err.msg);
    in.request = 7;
    CHECK(mf_offload_make_plan(&in, &p, &err) == MF_E_RANGE, "7 of 8 MiB in 48: %s", p.report);
    /* all: the embeddings/output count */
    in.request = MF_GPU_LAYERS_ALL;
    in.mem_override_mib = 256;
    CHECK(mf_offload_make_plan(&in, &p, &err) == MF_E_RANGE && strstr(err.msg, "and the embeddings/output") &&
              strstr(err.msg, "--gpu-layers 23 fits"),
          "all in 192: %s", err.msg);
    in.mem_override_mib = 1;
    CHECK(mf_offload_make_plan(&in, &p, &err) == MF_E_RANGE && strstr(err.msg, "not even one block fits"), "%s", err.msg);
    /* no usable device: a count is refused naming why; auto plans nothing and says why */
    in = base(2, "-ngl 2");
    in.unavailable = "the CUDA backend is compiled only with make CUDA=1";
    CHECK(mf_offload_make_plan(&in, &p, &err) == MF_E_UNSUPPORTED &&
              !strcmp(err.msg, "-ngl 2 asks for blocks on cuda, which is not usable here: the CUDA backend is compiled "
                               "only with make CUDA=1; use --gpu-layers 0"),
          "%s", err.msg);
    in.request = MF_GPU_LAYERS_AUTO;
    in.origin = "MINFER_GPU_LAYERS=auto";
    REQUIRE_OK(mf_offload_make_plan(&in, &p, &err), "%s", err.msg);
    CHECK(p.n_gpu == 0 && !strcmp(p.report, "offload: cpu only - 0 of 24 blocks on cuda (auto: cuda is not usable here: "
                                            "the CUDA backend is compiled only with make CUDA=1; MINFER_GPU_LAYERS=auto)"),
          "%s", p.report);
}

int main(void) {
    RUN(test_counts);
    RUN(test_auto);
    RUN(test_unknown_and_failed);
    RUN(test_refusals);
    return mf_test_done();
}
