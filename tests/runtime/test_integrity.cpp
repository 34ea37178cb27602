// A listed file is used only once all of it has been read and its sha256 is the
// manifest's, also when a loader reads it straight into tensors piece by piece.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <sys/stat.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <new>
#include <string>

#include "base/error.h"
#include "exec/safetensors.h"
#include "formats/integrity.h"
#include "test_support.h"

namespace {

struct ListedDir {
    std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("gpt_integrity." + std::to_string(::getpid()));
    gpt::Manifest manifest;

    ListedDir() { std::filesystem::create_directories(dir); }
    ~ListedDir() { test::remove_tree(dir); }

    // Writes `name` and lists it with its true size and hash.
    void put(const std::string &name, const gpt::Bytes &bytes) {
        write(name, bytes);
        manifest.files[name] = {gpt::sha256_hex(bytes.data(), bytes.size()), bytes.size()};
    }
    // Overwrites `name` after it was listed: the manifest keeps the old size and hash.
    void tamper(const std::string &name, const gpt::Bytes &bytes) const { write(name, bytes); }
    void append(const std::string &name, const std::string &tail) const {
        std::ofstream(dir / name, std::ios::binary | std::ios::app) << tail;
    }

private:
    void write(const std::string &name, const gpt::Bytes &bytes) const {
        std::ofstream(dir / name, std::ios::binary | std::ios::trunc)
            .write(reinterpret_cast<const char *>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    }
};

template <typename F>
gpt_status status_of(F &&f, std::string *message = nullptr) {
    try {
        f();
        return GPT_OK;
    } catch (const gpt::Error &e) {
        if (message) *message = e.what();
        return e.status();
    }
}

// A safetensors file whose data region holds its tensors in the opposite order of their names.
gpt::Bytes reversed_safetensors(const at::Tensor &a, const at::Tensor &b) {
    const uint64_t a_bytes = a.nbytes(), b_bytes = b.nbytes();
    const std::string header = R"({"a":{"dtype":"F32","shape":[)" + std::to_string(a.numel()) +
                               R"(],"data_offsets":[)" + std::to_string(b_bytes) + "," +
                               std::to_string(b_bytes + a_bytes) + R"(]},"b":{"dtype":"I64","shape":[)" +
                               std::to_string(b.numel()) + R"(],"data_offsets":[0,)" + std::to_string(b_bytes) + "]}}";
    gpt::Bytes bytes;
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<unsigned char>((header.size() >> (8 * i)) & 0xff));
    bytes.insert(bytes.end(), header.begin(), header.end());
    const auto *bp = static_cast<const unsigned char *>(b.data_ptr());
    const auto *ap = static_cast<const unsigned char *>(a.data_ptr());
    bytes.insert(bytes.end(), bp, bp + b_bytes);
    bytes.insert(bytes.end(), ap, ap + a_bytes);
    return bytes;
}

}  // namespace

TEST_CASE("a safetensors file read straight into tensors gives each entry its own bytes", "[integrity]") {
    ListedDir d;
    const at::Tensor a = at::arange(1000, at::kFloat) * 0.5;
    const at::Tensor b = at::arange(7, at::kLong) - 3;
    d.put("w.safetensors", reversed_safetensors(a, b));
    gpt::ListedFileReader file(d.dir, d.manifest, "w.safetensors");
    const auto tensors = gpt::read_safetensors(file);
    REQUIRE(tensors.size() == 2);
    CHECK(at::equal(tensors.at("a"), a));
    CHECK(at::equal(tensors.at("b"), b));
    CHECK(!tensors.at("a").storage().is_alias_of(tensors.at("b").storage()));

    gpt::ListedFileReader again(d.dir, d.manifest, "w.safetensors");
    const auto shared = gpt::read_safetensors_in_arena(again, {});
    CHECK(at::equal(shared.at("a"), a));
    CHECK(at::equal(shared.at("b"), b));
    CHECK(shared.at("a").storage().is_alias_of(shared.at("b").storage()));  // one arena (exec/host_pages.h)

    gpt::ListedFileReader third(d.dir, d.manifest, "w.safetensors");
    const auto apart = gpt::read_safetensors_in_arena(third, {"b"});
    CHECK(at::equal(apart.at("a"), a));
    CHECK(at::equal(apart.at("b"), b));
    CHECK(!apart.at("a").storage().is_alias_of(apart.at("b").storage()));  // "b" in memory of its own
}

TEST_CASE("a file streamed into tensors is refused unless all of it has the manifest's hash", "[integrity]") {
    ListedDir d;
    const gpt::Bytes good = reversed_safetensors(at::ones({64}), at::zeros({2}, at::kLong));
    std::string message;

    SECTION("a changed data byte, same size") {
        gpt::Bytes bad = good;
        bad.back() ^= 1;
        d.put("w.safetensors", good);
        d.tamper("w.safetensors", bad);
        gpt::ListedFileReader file(d.dir, d.manifest, "w.safetensors");
        CHECK(status_of([&] { gpt::read_safetensors(file); }, &message) == GPT_ERR_ARTIFACT_HASH);
        CHECK_THAT(message, Catch::Contains("sha256 of 'w.safetensors'"));
    }
    SECTION("a header that no longer parses is corruption when the hash disagrees...") {
        gpt::Bytes bad = good;
        bad[8] = '[';  // the header's opening brace
        d.put("w.safetensors", good);
        d.tamper("w.safetensors", bad);
        gpt::ListedFileReader file(d.dir, d.manifest, "w.safetensors");
        CHECK(status_of([&] { gpt::read_safetensors(file); }, &message) == GPT_ERR_ARTIFACT_HASH);
    }
    SECTION("...and a malformed file when the hash agrees") {
        gpt::Bytes bad = good;
        bad[8] = '[';
        d.put("w.safetensors", bad);
        gpt::ListedFileReader file(d.dir, d.manifest, "w.safetensors");
        CHECK(status_of([&] { gpt::read_safetensors(file); }, &message) == GPT_ERR_ARTIFACT_INVALID);
        CHECK_THAT(message, Catch::Contains("not a JSON object"));
    }
}

TEST_CASE("whatever stops a streamed read, the hash is checked first", "[integrity]") {
    // A reader whose third read (the first tensor's bytes) fails as an allocation would.
    struct FailingReader : gpt::ListedFileReader {
        using ListedFileReader::ListedFileReader;
        int reads = 0;
        void read(unsigned char *out, uint64_t n) override {
            if (++reads == 3) throw std::bad_alloc();
            ListedFileReader::read(out, n);
        }
    };
    ListedDir d;
    const gpt::Bytes good = reversed_safetensors(at::ones({64}), at::zeros({2}, at::kLong));
    gpt::Bytes bad = good;
    bad.back() ^= 1;

    d.put("w.safetensors", good);
    d.tamper("w.safetensors", bad);
    FailingReader corrupt(d.dir, d.manifest, "w.safetensors");
    CHECK(status_of([&] { gpt::read_safetensors(corrupt); }) == GPT_ERR_ARTIFACT_HASH);

    d.put("w.safetensors", good);
    FailingReader intact(d.dir, d.manifest, "w.safetensors");
    CHECK_THROWS_AS(gpt::read_safetensors(intact), std::bad_alloc);
}

TEST_CASE("a FIFO in a file's place is refused, not waited on", "[integrity]") {
    ListedDir d;
    const std::string fifo = (d.dir / "fifo").string();
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);  // nothing ever writes to it: an open that waits never returns
    std::string message;
    CHECK(status_of([&] { gpt::FileReader(fifo, "fifo", GPT_ERR_ARTIFACT_HASH, gpt::Links::follow); }, &message) ==
          GPT_ERR_ARTIFACT_INVALID);
    CHECK_THAT(message, Catch::Contains("not a regular file"));
    CHECK(status_of([&] { gpt::read_file(fifo, 1024, gpt::Links::follow); }, &message) == GPT_ERR_ARTIFACT_INVALID);
    CHECK_THAT(message, Catch::Contains("not a regular file"));
}

TEST_CASE("a listed file that grows or shrinks while it is read is refused", "[integrity]") {
    ListedDir d;
    const gpt::Bytes bytes(3000, 0x5a);
    std::string message;
    d.put("f.bin", bytes);
    {
        gpt::ListedFileReader grown(d.dir, d.manifest, "f.bin");  // size checked at open
        d.append("f.bin", "more");
        CHECK(status_of([&] { grown.finish(); }, &message) == GPT_ERR_ARTIFACT_HASH);
        CHECK_THAT(message, Catch::Contains("changed while being read"));
    }
    d.put("f.bin", bytes);
    {
        gpt::ListedFileReader shrunk(d.dir, d.manifest, "f.bin");
        std::filesystem::resize_file(d.dir / "f.bin", 1000);
        gpt::Bytes out(2000);
        CHECK(status_of([&] { shrunk.read(out.data(), out.size()); }, &message) == GPT_ERR_ARTIFACT_HASH);
        CHECK_THAT(message, Catch::Contains("changed while being read"));
    }
}

TEST_CASE("finish() hashes what the reader left unread, so a partial read proves nothing", "[integrity]") {
    ListedDir d;
    gpt::Bytes bytes(5 << 20, 0x11);  // past the 1 MiB piece finish() reads at a time
    d.put("f.bin", bytes);
    bytes[(5 << 20) - 1] = 0x12;  // a change beyond what is read below, in a file of the listed size
    d.tamper("f.bin", bytes);
    gpt::ListedFileReader file(d.dir, d.manifest, "f.bin");
    gpt::Bytes head(16);
    file.read(head.data(), head.size());
    CHECK(file.remaining() == bytes.size() - 16);
    CHECK(status_of([&] { file.finish(); }) == GPT_ERR_ARTIFACT_HASH);
    CHECK(status_of([&] { gpt::verify_files(d.dir, d.manifest); }) == GPT_ERR_ARTIFACT_HASH);
    d.put("f.bin", bytes);  // listed as it is now
    CHECK(status_of([&] { gpt::verify_files(d.dir, d.manifest); }) == GPT_OK);
}
