// Memory figures through the C ABI: weights counted once, no device memory on CPU.
#include <catch2/catch.hpp>

#include <fstream>

#include "test_support.h"

TEST_CASE("memory stats count each stored weight once and no device memory for a CPU model", "[memory]") {
    const auto dir = test::artifact("math");
    test::Model model(dir);
    REQUIRE(model.status == GPT_OK);

    // The weights file stores tied weights once; the model binds them under both names.
    std::ifstream manifest(dir / "manifest.json");
    const std::string weights_file = nlohmann::json::parse(manifest)["weights"]["file"];
    uint64_t stored = 0;
    for (const auto &[name, tensor] : test::read_safetensors(dir / weights_file)) stored += tensor.nbytes();
    REQUIRE(stored > 0);

    gpt_memory_stats stats{};
    REQUIRE(gpt_model_get_memory(model.handle, &stats) == GPT_OK);
    CHECK(stats.weights_bytes == stored);
    CHECK(stats.device_allocated_bytes == 0);
    CHECK(stats.device_peak_bytes == 0);
    CHECK(stats.device_reserved_bytes == 0);
    CHECK(stats.host_peak_rss_bytes >= stored);  // the weights live in this process's memory

    CHECK(gpt_model_reset_peak_memory(model.handle) == GPT_OK);
    CHECK(gpt_model_get_memory(model.handle, nullptr) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(gpt_model_get_memory(nullptr, &stats) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(gpt_model_reset_peak_memory(nullptr) == GPT_ERR_INVALID_ARGUMENT);
}
