// The safetensors reader refuses every malformed layout instead of reading out of bounds.
#include <ATen/core/Tensor.h>
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "base/error.h"
#include "exec/safetensors.h"

namespace {

std::vector<unsigned char> file_with(const std::string &header, size_t data_bytes, uint64_t declared_len = 0) {
    const uint64_t len = declared_len ? declared_len : header.size();
    std::vector<unsigned char> bytes;
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<unsigned char>((len >> (8 * i)) & 0xff));
    bytes.insert(bytes.end(), header.begin(), header.end());
    bytes.resize(bytes.size() + data_bytes, 0x3f);
    return bytes;
}

gpt_status parse_status(const std::vector<unsigned char> &bytes) {
    try {
        gpt::parse_safetensors(bytes.data(), bytes.size(), "test.safetensors");
        return GPT_OK;
    } catch (const gpt::Error &e) {
        return e.status();
    }
}

}  // namespace

TEST_CASE("a well-formed file parses into tensors of the declared shape", "[safetensors]") {
    const auto bytes = file_with(
        R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"b":{"dtype":"I64","shape":[1],"data_offsets":[24,32]},"__metadata__":{"k":"v"}})",
        32);
    const auto t = gpt::parse_safetensors(bytes.data(), bytes.size(), "x");
    REQUIRE(t.size() == 2);
    CHECK(t.at("a").sizes() == at::IntArrayRef({2, 3}));
    CHECK(t.at("a").scalar_type() == at::kFloat);
    CHECK(t.at("b").scalar_type() == at::kLong);
}

TEST_CASE("an empty entry may start where a non-empty one does", "[safetensors]") {
    // Both orders in the header, since the tiling check must not depend on which comes first.
    for (const char *header : {R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
                               R"("b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                               R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                               R"("b":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})"}) {
        const auto bytes = file_with(header, 8);
        const auto t = gpt::parse_safetensors(bytes.data(), bytes.size(), "x");
        REQUIRE(t.size() == 2);
        CHECK(t.at("a").numel() + t.at("b").numel() == 2);
    }
}

TEST_CASE("malformed layouts are ARTIFACT_INVALID", "[safetensors]") {
    const std::string ok_entry = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    SECTION("shorter than the length prefix") { CHECK(parse_status({1, 2, 3}) == GPT_ERR_ARTIFACT_INVALID); }
    SECTION("header length past the end") {
        CHECK(parse_status(file_with(ok_entry, 8, 1 << 20)) == GPT_ERR_ARTIFACT_INVALID);
    }
    SECTION("header length near 2^64 does not wrap") {
        CHECK(parse_status(file_with(ok_entry, 8, ~0ull - 3)) == GPT_ERR_ARTIFACT_INVALID);
    }
    SECTION("header not JSON") { CHECK(parse_status(file_with("{not json", 8)) == GPT_ERR_ARTIFACT_INVALID); }
    SECTION("unknown dtype") {
        CHECK(parse_status(file_with(R"({"a":{"dtype":"F8","shape":[2],"data_offsets":[0,2]}})", 2)) ==
              GPT_ERR_ARTIFACT_INVALID);
    }
    SECTION("shape disagrees with byte length") {
        CHECK(parse_status(file_with(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8)) ==
              GPT_ERR_ARTIFACT_INVALID);
    }
    SECTION("offsets beyond the data") {
        CHECK(parse_status(file_with(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 8)) ==
              GPT_ERR_ARTIFACT_INVALID);
    }
    SECTION("shape product overflows") {
        CHECK(parse_status(file_with(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})",
                                     0)) == GPT_ERR_ARTIFACT_INVALID);
    }
    SECTION("overlapping entries") {
        CHECK(parse_status(file_with(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                     R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                     8)) == GPT_ERR_ARTIFACT_INVALID);
    }
    SECTION("gap between entries") {
        CHECK(parse_status(file_with(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8)) ==
              GPT_ERR_ARTIFACT_INVALID);
    }
    SECTION("trailing bytes after the last entry") {
        CHECK(parse_status(file_with(ok_entry, 12)) == GPT_ERR_ARTIFACT_INVALID);
    }
    SECTION("an empty dimension beside ones whose strides overflow") {
        // No bytes, but a tensor of this shape has a stride of 2^64: refused before one is made.
        CHECK(parse_status(file_with(R"({"a":{"dtype":"F32","shape":[0,4611686018427387904,4],"data_offsets":[0,0]}})",
                                     0)) == GPT_ERR_ARTIFACT_INVALID);
    }
    SECTION("nesting deeper than the schema's three levels") {
        const std::string deep = std::string(200000, '[') + std::string(200000, ']');
        CHECK(parse_status(file_with(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":)" + deep + "}}",
                                     8)) == GPT_ERR_ARTIFACT_INVALID);
    }
    SECTION("header longer than 16 MiB") {
        CHECK(parse_status(file_with(ok_entry + std::string((16u << 20) - ok_entry.size() + 1, ' '), 8)) ==
              GPT_ERR_ARTIFACT_INVALID);
    }
    SECTION("negative dimension") {
        CHECK(parse_status(file_with(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8)) ==
              GPT_ERR_ARTIFACT_INVALID);
    }
}
