// Memory through the C ABI: the figures (weights counted once with their packed copies, none on the
// device for a CPU model, the GPU's for a CUDA one), loads and frees that leave nothing behind, and out of GPU
// memory as a status after which the same model serves the next request.
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/ones.h>
#include <c10/util/Exception.h>
#include <malloc.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "exec/host_pages.h"
#include "test_support.h"

namespace {

// The process's anonymous resident bytes (/proc/self/statm: resident less file-backed) once the allocator has
// handed its free pages back: where weights live, without the library code a cycle may touch first.
uint64_t anonymous_resident_bytes() {
    malloc_trim(0);
    std::ifstream statm("/proc/self/statm");
    uint64_t pages = 0, resident = 0, file_backed = 0;
    statm >> pages >> resident >> file_backed;
    return (resident - file_backed) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace

TEST_CASE("memory stats count each stored weight once and no device memory for a CPU model", "[memory]") {
    const auto dir = test::artifact("math");
    test::Model model(dir);
    REQUIRE(model.status == GPT_OK);

    // The weights file stores tied weights once; the model binds them under both names. The graphs whose
    // linears are oneDNN's read packed copies of the weights they list, each copy the weight's size.
    std::ifstream manifest_file(dir / "manifest.json");
    const auto manifest = nlohmann::json::parse(manifest_file);
    const auto weights = test::read_safetensors(dir / manifest["weights"]["file"].get<std::string>());
    uint64_t stored = 0;
    for (const auto &[name, tensor] : weights) stored += tensor.nbytes();
    REQUIRE(stored > 0);
    std::set<std::string> packed;
    for (const auto &[graph, spec] : manifest["graphs"].items())
        if (spec.contains("linear") && spec["linear"].contains("packed"))
            for (const auto &name : spec["linear"]["packed"]) packed.insert(name.get<std::string>());
    REQUIRE(packed.count("lm_head.weight") == 1);  // this artifact packs: the sum below is not just `stored`
    uint64_t packed_bytes = 0;
    for (const std::string &name : packed) {
        const auto tied = manifest["weights"]["tied"];
        const std::string source = tied.contains(name) ? tied[name].get<std::string>() : name;
        packed_bytes += weights.at(source).nbytes();
    }

    gpt_memory_stats stats{};
    REQUIRE(gpt_model_get_memory(model.handle, &stats, sizeof stats) == GPT_OK);
    CHECK(stats.weights_bytes == stored + packed_bytes);
    CHECK(stats.device_allocated_bytes == 0);
    CHECK(stats.device_peak_bytes == 0);
    CHECK(stats.device_reserved_bytes == 0);
    CHECK(stats.host_peak_rss_bytes >= stored);  // the weights live in this process's memory

    CHECK(gpt_model_reset_peak_memory(model.handle) == GPT_OK);
    CHECK(gpt_model_get_memory(model.handle, nullptr, sizeof stats) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(gpt_model_get_memory(nullptr, &stats, sizeof stats) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(gpt_model_reset_peak_memory(nullptr) == GPT_ERR_INVALID_ARGUMENT);
}

TEST_CASE("100 loads and frees of a model leave none of its weights behind", "[memory]") {
    // torch 2.11's AOTInductor container never deleted the handles it made on the weights bound to a graph
    // (exec/graph.cpp, ~Graph): every load and free left the model's weights resident. tiny-bpe shows it most
    // plainly (every linear mm, nothing packed): +251 kB a cycle for its 234 kB of weights.
    const auto dir = test::artifact("bpe");
    uint64_t weights = 0;
    {
        test::Model model(dir);
        REQUIRE(model.status == GPT_OK);
        gpt_memory_stats stats{};
        REQUIRE(gpt_model_get_memory(model.handle, &stats, sizeof stats) == GPT_OK);
        weights = stats.weights_bytes;
    }
    REQUIRE(weights > uint64_t{100} * 1024);
    const auto cycle = [&] {
        gpt_model *model = nullptr;
        REQUIRE(gpt_model_load(dir.c_str(), nullptr, &model) == GPT_OK);
        REQUIRE(gpt_model_free(model) == GPT_OK);
    };
    // The allocator's arenas and torch's caches settle in the first cycles. After them a reading still varies by
    // some pages from cycle to cycle (where freed chunks fall); the lowest of 25 readings is the floor that a
    // leak raises. The two floors' windows are 100 cycles apart.
    const auto floor_after = [&](int cycles) {
        uint64_t lowest = UINT64_MAX;
        for (int i = 0; i < cycles; ++i) {
            cycle();
            lowest = std::min(lowest, anonymous_resident_bytes());
        }
        return lowest;
    };
    floor_after(10);
    const uint64_t before = floor_after(25);
    floor_after(75);
    const uint64_t after = floor_after(25);
    INFO("anonymous resident " << before << " -> " << after << " bytes over 100 cycles; one model's weights are "
                               << weights);
    CHECK(after < before + weights / 10);
}

namespace {

// The VmFlags of the mapping that holds `address` (/proc/self/smaps), or "" where none does.
std::string mapping_flags(const void *address) {
    std::ifstream smaps("/proc/self/smaps");
    const auto at = reinterpret_cast<uintptr_t>(address);
    bool inside = false;
    for (std::string line; std::getline(smaps, line);) {
        uintptr_t begin = 0, end = 0;
        char dash = 0;
        std::istringstream range(line);
        if (range >> std::hex >> begin >> dash >> end && dash == '-' && line.find(' ') != std::string::npos &&
            line.find(':') > line.find(' '))
            inside = begin <= at && at < end;
        else if (inside && line.rfind("VmFlags:", 0) == 0)
            return line;
    }
    return "";
}

}  // namespace

TEST_CASE("tensors of 2 MiB or more get their own 2 MiB-aligned mapping, offered for huge pages", "[memory]") {
    constexpr uintptr_t huge_page = uintptr_t{2} << 20;
    const void *data = nullptr;
    {
        at::Tensor big = gpt::empty_in_host_pages({3 << 19, 2}, at::kBFloat16);  // 3 MiB, not a multiple of 2
        data = big.data_ptr();
        CHECK(reinterpret_cast<uintptr_t>(data) % huge_page == 0);
        CHECK(big.is_contiguous());
        CHECK(big.sizes() == at::IntArrayRef({3 << 19, 2}));
        // madvise(MADV_HUGEPAGE) marks the mapping "hg" (its first 2 MiB: the tail keeps small pages), on a kernel
        // built with transparent huge pages.
        if (std::filesystem::exists("/sys/kernel/mm/transparent_hugepage"))
            CHECK(mapping_flags(data).find(" hg") != std::string::npos);
        big.fill_(1.5);
        CHECK(big.sum().item<double>() == 1.5 * 3 * (1 << 20));
    }
    CHECK(mapping_flags(data).find(" hg") == std::string::npos);  // unmapped with its tensor

    const at::Tensor small = gpt::empty_in_host_pages({1000}, at::kFloat);  // from torch's allocator
    CHECK(small.numel() == 1000);
}

TEST_CASE("an arena's tensors lie side by side in one huge-page mapping that goes with the last of them", "[memory]") {
    constexpr uintptr_t huge_page = uintptr_t{2} << 20;
    using gpt::HostArena;
    CHECK(HostArena::slot_bytes({1000}, at::kFloat) == 4032);  // 4000 up to a multiple of 64
    CHECK(HostArena::slot_bytes({3, 5}, at::kBFloat16) == 64);
    const uint64_t room = HostArena::slot_bytes({1000}, at::kFloat) + HostArena::slot_bytes({3, 5}, at::kBFloat16) +
                          HostArena::slot_bytes({1 << 21}, at::kByte);
    at::Tensor kept;
    const void *data = nullptr;
    {
        HostArena arena(room);
        at::Tensor a = arena.take({1000}, at::kFloat), b = arena.take({3, 5}, at::kBFloat16);
        kept = arena.take({1 << 21}, at::kByte);
        data = a.data_ptr();
        CHECK(reinterpret_cast<uintptr_t>(data) % huge_page == 0);
        CHECK(static_cast<char *>(b.data_ptr()) == static_cast<const char *>(data) + 4032);
        CHECK(static_cast<char *>(kept.data_ptr()) == static_cast<const char *>(data) + 4032 + 64);
        for (const at::Tensor &t : {a, b, kept}) {
            CHECK(t.is_contiguous());
            CHECK(t.storage().is_alias_of(a.storage()));
        }
        CHECK(b.sizes() == at::IntArrayRef({3, 5}));
        CHECK(b.scalar_type() == at::kBFloat16);
        a.fill_(1);
        b.fill_(2);
        kept.fill_(3);  // none overlaps another
        CHECK(a.sum().item<double>() == 1000);
        CHECK(b.sum().item<double>() == 30);
        CHECK(kept.sum().item<double>() == 3.0 * (1 << 21));
        CHECK_THROWS_AS(arena.take({1}, at::kByte), std::logic_error);  // full
        if (std::filesystem::exists("/sys/kernel/mm/transparent_hugepage"))
            CHECK(mapping_flags(data).find(" hg") != std::string::npos);
    }
    if (std::filesystem::exists("/sys/kernel/mm/transparent_hugepage"))
        CHECK(mapping_flags(data).find(" hg") != std::string::npos);  // `kept` holds the whole mapping
    kept = at::Tensor();
    CHECK(mapping_flags(data).find(" hg") == std::string::npos);
}

TEST_CASE("gathered tensors become contiguous copies in one arena, other devices' and undefined ones untouched",
          "[memory]") {
    const at::Tensor big = at::arange(3 << 19, at::kFloat), small = at::arange(10, at::kBFloat16);
    const at::Tensor transposed = at::arange(12, at::kLong).view({3, 4}).t();
    at::Tensor a = big, b = small, c = transposed, none;
    gpt::gather_in_host_pages({&a, &b, &c, &none});
    CHECK(reinterpret_cast<uintptr_t>(a.data_ptr()) % (uintptr_t{2} << 20) == 0);
    for (const at::Tensor *t : {&a, &b, &c}) {
        CHECK(t->is_contiguous());
        CHECK(t->storage().is_alias_of(a.storage()));
    }
    CHECK(a.data_ptr() != big.data_ptr());
    CHECK(at::equal(a, big));
    CHECK(at::equal(b, small));
    CHECK(at::equal(c, transposed));
    CHECK(!none.defined());
}

TEST_CASE("a CUDA model reports its GPU memory, and a reset starts a new peak", "[memory][cuda]") {
    std::filesystem::path dir;
    if (!test::have_cuda_artifact(&dir)) return;
    test::Model model(dir);
    REQUIRE(model.status == GPT_OK);
    gpt_status status = GPT_OK;
    test::try_generate(model.handle, {1, 2, 3}, 1, 8, &status);
    REQUIRE(status == GPT_OK);

    gpt_memory_stats stats{};
    REQUIRE(gpt_model_get_memory(model.handle, &stats, sizeof stats) == GPT_OK);
    CHECK(stats.weights_bytes > 0);
    CHECK(stats.device_allocated_bytes >= stats.weights_bytes);  // the weights live on the GPU
    CHECK(stats.device_peak_bytes >= stats.device_allocated_bytes);
    CHECK(stats.device_reserved_bytes >= stats.device_allocated_bytes);

    REQUIRE(gpt_model_reset_peak_memory(model.handle) == GPT_OK);
    REQUIRE(gpt_model_get_memory(model.handle, &stats, sizeof stats) == GPT_OK);
    CHECK(stats.device_peak_bytes == stats.device_allocated_bytes);
}

TEST_CASE("out of GPU memory is GPT_ERR_OUT_OF_MEMORY and the next request on the model succeeds", "[memory][cuda]") {
    std::filesystem::path dir;
    if (!test::have_cuda_artifact(&dir)) return;
    test::Model model(dir);
    REQUIRE(model.status == GPT_OK);
    const std::vector<gpt_token> prompt = {1, 2, 3, 4};
    gpt_status status = GPT_OK;
    const auto expected = test::try_generate(model.handle, prompt, 5, 16, &status);
    REQUIRE(status == GPT_OK);

    {
        // Take every byte torch's allocator can get, in halving chunks down to its
        // smallest block, so that the request's next allocation has nowhere to go.
        std::vector<at::Tensor> hog;
        const auto on_gpu = at::TensorOptions().dtype(at::kByte).device(at::kCUDA);
        for (int64_t chunk = int64_t{1} << 30; chunk >= 512; chunk /= 2) {
            try {
                for (;;) hog.push_back(at::empty({chunk}, on_gpu));
            } catch (const c10::OutOfMemoryError &) {
            }
        }
        test::try_generate(model.handle, prompt, 5, 16, &status);
        CHECK(status == GPT_ERR_OUT_OF_MEMORY);
        CHECK(test::error_mentions("out of device memory"));
    }

    CHECK(test::try_generate(model.handle, prompt, 5, 16, &status) == expected);
    CHECK(status == GPT_OK);
}
