// The versioned structs of the C ABI (gpt_runtime.h, "Versioning"): a caller
// built against an older, smaller struct gets only the fields it knows and the
// bytes after its struct stay as they were; params from such a caller take the
// defaults for the rest; sizes the library cannot honour are refused.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "test_support.h"

namespace {

constexpr unsigned char kGuard = 0xA5;

// A struct as an older header declared it: the first `known` bytes of T, then
// bytes the library must not touch (the caller's next variables).
template <typename T>
struct OlderCaller {
    alignas(T) unsigned char bytes[sizeof(T) + 64];
    explicit OlderCaller() { std::memset(bytes, kGuard, sizeof bytes); }
    T *as_struct() { return reinterpret_cast<T *>(bytes); }
    // Every byte from `from` to the end still holds the guard.
    bool untouched_from(size_t from) const {
        for (size_t i = from; i < sizeof bytes; ++i)
            if (bytes[i] != kGuard) return false;
        return true;
    }
};

}  // namespace

TEST_CASE("an older gpt_model_info gets the fields it knows, the bytes after it untouched", "[abi]") {
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    const size_t known = offsetof(gpt_model_info, vocab_size);  // as if the struct ended after `tokenizer`
    OlderCaller<gpt_model_info> caller;
    REQUIRE(gpt_model_get_info(model.handle, caller.as_struct(), known) == GPT_OK);
    const gpt_model_info *older = caller.as_struct();
    CHECK(older->struct_size == known);
    CHECK(std::strcmp(older->name, model.info.name) == 0);
    CHECK(std::strcmp(older->device, "cpu") == 0);
    CHECK(std::strcmp(older->tokenizer, model.info.tokenizer) == 0);
    CHECK(caller.untouched_from(known));
}

TEST_CASE("an older gpt_memory_stats gets the fields it knows, the bytes after it untouched", "[abi]") {
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    gpt_memory_stats full{};
    REQUIRE(gpt_model_get_memory(model.handle, &full, sizeof full) == GPT_OK);
    CHECK(full.struct_size == sizeof full);
    const size_t known = offsetof(gpt_memory_stats, device_allocated_bytes);
    OlderCaller<gpt_memory_stats> caller;
    REQUIRE(gpt_model_get_memory(model.handle, caller.as_struct(), known) == GPT_OK);
    CHECK(caller.as_struct()->struct_size == known);
    CHECK(caller.as_struct()->weights_bytes == full.weights_bytes);
    CHECK(caller.untouched_from(known));
}

TEST_CASE("an older gpt_trainer_state gets the fields it knows, the bytes after it untouched", "[abi]") {
    test::Model model(test::artifact("math"));
    REQUIRE(model.status == GPT_OK);
    const gpt_trainer_params params = test::reference_trainer_params();
    gpt_trainer *trainer = nullptr;
    REQUIRE(gpt_trainer_create(model.handle, &params, &trainer) == GPT_OK);
    const size_t known = offsetof(gpt_trainer_state, learning_rate);
    OlderCaller<gpt_trainer_state> caller;
    CHECK(gpt_trainer_get_state(trainer, caller.as_struct(), known) == GPT_OK);
    CHECK(caller.as_struct()->struct_size == known);
    CHECK(caller.as_struct()->iteration == 0);
    CHECK(caller.untouched_from(known));
    CHECK(gpt_trainer_free(trainer) == GPT_OK);
}

TEST_CASE("an older params struct is filled as far as it goes by its *_default_params", "[abi]") {
    const size_t known = offsetof(gpt_generate_params, seed);
    OlderCaller<gpt_generate_params> caller;
    REQUIRE(gpt_generate_default_params(caller.as_struct(), known) == GPT_OK);
    CHECK(caller.as_struct()->struct_size == known);
    CHECK(caller.as_struct()->max_new_tokens == 64);
    CHECK(caller.as_struct()->top_p == 1.0f);
    CHECK(caller.untouched_from(known));

    OlderCaller<gpt_model_params> model_caller;
    const size_t model_known = offsetof(gpt_model_params, verify_golden);
    REQUIRE(gpt_model_default_params(model_caller.as_struct(), model_known) == GPT_OK);
    CHECK(model_caller.as_struct()->num_runners == 1);
    CHECK(model_caller.untouched_from(model_known));
}

TEST_CASE("params from an older caller take the defaults beyond its struct_size", "[abi]") {
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    const std::vector<gpt_token> prompt = {1, 2, 3};
    auto generate = [&](const gpt_generate_params *params, std::vector<gpt_token> *out) {
        test::Session session(model.handle);
        out->assign(8, 0);
        int32_t count = 0;
        const gpt_status s = gpt_session_generate(session.handle, prompt.data(), 3, params, out->data(), 8, &count);
        out->resize(s == GPT_OK ? static_cast<size_t>(count) : 0);
        return s;
    };

    gpt_generate_params defaults;
    REQUIRE(gpt_generate_default_params(&defaults, sizeof defaults) == GPT_OK);
    defaults.max_new_tokens = 8;
    std::vector<gpt_token> expected;
    REQUIRE(generate(&defaults, &expected) == GPT_OK);

    // The caller's struct ends before `seed`: its guard bytes, read as seed, stop
    // token and callback, would change the tokens or crash if the library read them.
    OlderCaller<gpt_generate_params> caller;
    REQUIRE(gpt_generate_default_params(caller.as_struct(), offsetof(gpt_generate_params, seed)) == GPT_OK);
    caller.as_struct()->max_new_tokens = 8;
    std::vector<gpt_token> older;
    REQUIRE(generate(caller.as_struct(), &older) == GPT_OK);
    CHECK(older == expected);
}

TEST_CASE("struct sizes the library cannot honour are refused, outputs untouched", "[abi]") {
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);

    OlderCaller<gpt_model_info> info;
    CHECK(gpt_model_get_info(model.handle, info.as_struct(), 0) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(test::error_mentions("pass sizeof the struct"));
    CHECK(info.untouched_from(0));

    gpt_model_params params;
    REQUIRE(gpt_model_default_params(&params, sizeof params) == GPT_OK);
    gpt_model *loaded = nullptr;
    SECTION("a params struct from a newer header than the library's") {
        params.struct_size = sizeof params + 8;
        CHECK(gpt_model_load(test::artifact("flash").c_str(), &params, &loaded) == GPT_ERR_INVALID_ARGUMENT);
        CHECK(test::error_mentions("knows " + std::to_string(sizeof params) + " bytes"));
    }
    SECTION("a params struct whose struct_size was never set") {
        params.struct_size = 0;
        CHECK(gpt_model_load(test::artifact("flash").c_str(), &params, &loaded) == GPT_ERR_INVALID_ARGUMENT);
    }
    CHECK(loaded == nullptr);
}

TEST_CASE("a newer caller's larger output struct gets what the library knows, and is told how much", "[abi]") {
    test::Model model(test::artifact("flash"));
    REQUIRE(model.status == GPT_OK);
    OlderCaller<gpt_model_info> newer;  // sizeof + 64: as if a newer header had added fields
    REQUIRE(gpt_model_get_info(model.handle, newer.as_struct(), sizeof newer.bytes) == GPT_OK);
    CHECK(newer.as_struct()->struct_size == sizeof(gpt_model_info));
    CHECK(newer.as_struct()->vocab_size == model.info.vocab_size);
    CHECK(newer.untouched_from(sizeof(gpt_model_info)));
}
