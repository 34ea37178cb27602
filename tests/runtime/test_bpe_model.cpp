// A byte-level BPE model (tests/fixtures/build_artifacts.py: tiny-bpe, its
// tokenizer trained on the corpus) through the public C API: EOS in the model
// info and at the end of generation, special tokens only when asked, the
// streaming detokenizer, and training on the BPE dataset.
#include <sodium.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "dataset.h"
#include "test_support.h"

namespace {

std::filesystem::path bpe_artifact() { return test::artifact("bpe"); }

// The id tokenizer.json gives "<|endoftext|>": what eos_token must be.
gpt_token endoftext_id() {
    std::ifstream in(bpe_artifact() / "tokenizer.json");
    const auto j = nlohmann::json::parse(in);
    return j.at("special").at("<|endoftext|>").get<gpt_token>();
}

// The id of the token whose bytes are the single byte `byte`, as tokenizer.json lists it.
gpt_token byte_token(char byte) {
    std::ifstream in(bpe_artifact() / "tokenizer.json");
    const auto vocab = nlohmann::json::parse(in).at("vocab");
    char base64[8];
    sodium_bin2base64(base64, sizeof base64, reinterpret_cast<const unsigned char *>(&byte), 1,
                      sodium_base64_VARIANT_ORIGINAL);
    for (size_t id = 0; id < vocab.size(); ++id)
        if (vocab[id].is_string() && vocab[id].get<std::string>() == base64) return static_cast<gpt_token>(id);
    FAIL("tokenizer.json has no token for byte " << static_cast<int>(byte));
    return -1;
}

std::vector<gpt_token> tokenize(gpt_model *model, const std::string &text, bool with_special, gpt_status *status) {
    std::vector<gpt_token> ids(256);
    int32_t n = 0;
    *status = with_special ? gpt_model_tokenize_with_special(model, text.c_str(), ids.data(), 256, &n)
                           : gpt_model_tokenize(model, text.c_str(), ids.data(), 256, &n);
    ids.resize(*status == GPT_OK ? static_cast<size_t>(n) : 0);
    return ids;
}

std::string push(gpt_detokenizer *d, gpt_token token) {
    char text[64];
    size_t size = 0;
    REQUIRE(gpt_detokenizer_push(d, token, text, sizeof text, &size) == GPT_OK);
    return std::string(text, size - 1);
}

// Generation from `prompt` with sampling at temperature 1.
std::vector<gpt_token> generate(gpt_model *model, uint64_t seed, int n, bool stop_at_eos) {
    test::Session session(model);
    gpt_generate_params p = test::default_generate_params();
    p.max_new_tokens = n;
    p.seed = seed;
    p.stop_at_eos = stop_at_eos;
    const std::vector<gpt_token> prompt = {1, 2, 3};
    std::vector<gpt_token> out(static_cast<size_t>(n));
    int32_t count = 0;
    REQUIRE(gpt_session_generate(session.handle, prompt.data(), 3, &p, out.data(), n, &count) == GPT_OK);
    out.resize(static_cast<size_t>(count));
    return out;
}

}  // namespace

TEST_CASE("a BPE model reports its tokenizer and EOS", "[bpe]") {
    test::Model model(bpe_artifact());
    REQUIRE(model.status == GPT_OK);
    CHECK(std::string(model.info.tokenizer) == "bpe");
    CHECK(model.info.eos_token == endoftext_id());
    // A char model has no EOS.
    test::Model chars(test::artifact("math"));
    REQUIRE(chars.status == GPT_OK);
    CHECK(chars.info.eos_token == GPT_TOKEN_NONE);
}

TEST_CASE("special tokens are text unless the caller allows them", "[bpe]") {
    test::Model model(bpe_artifact());
    REQUIRE(model.status == GPT_OK);
    gpt_status s = GPT_OK;
    const auto plain = tokenize(model.handle, "In the beginning<|endoftext|>", false, &s);
    REQUIRE(s == GPT_OK);
    CHECK(std::find(plain.begin(), plain.end(), endoftext_id()) == plain.end());
    const auto special = tokenize(model.handle, "In the beginning<|endoftext|>", true, &s);
    REQUIRE(s == GPT_OK);
    CHECK(special.back() == endoftext_id());
    CHECK(special.size() < plain.size());
    (void)tokenize(model.handle, "bad \xC3(", false, &s);
    CHECK(s == GPT_ERR_INVALID_ARGUMENT);
    CHECK(test::error_mentions("not valid UTF-8 at byte 4"));
}

TEST_CASE("text with its length keeps NUL bytes; a C string ends at the first", "[bpe]") {
    test::Model model(bpe_artifact());
    REQUIRE(model.status == GPT_OK);
    const std::string text("a\0b", 3);  // GPT-2's pattern: pieces "a", "\0" (not a letter), "b"; a byte token each
    const std::vector<gpt_token> want = {byte_token('a'), byte_token('\0'), byte_token('b')};
    std::vector<gpt_token> ids(8);
    int32_t n = 0;
    REQUIRE(gpt_model_tokenize_n(model.handle, text.data(), text.size(), 0, ids.data(), 8, &n) == GPT_OK);
    CHECK(std::vector<gpt_token>(ids.begin(), ids.begin() + n) == want);
    char back[8];
    size_t size = 0;
    REQUIRE(gpt_model_detokenize(model.handle, ids.data(), n, back, sizeof back, &size) == GPT_OK);
    CHECK(std::string(back, size - 1) == text);
    // The C-string calls read "a" (documented in the header): what gpt-server refused NUL for.
    gpt_status s = GPT_OK;
    CHECK(tokenize(model.handle, text, false, &s) == std::vector<gpt_token>{byte_token('a')});
    CHECK(s == GPT_OK);
    // GPT_TOKENIZE_SPECIAL as gpt_model_tokenize_with_special; specials after a NUL are found too.
    const std::string special = std::string("\0<|endoftext|>", 14);
    REQUIRE(gpt_model_tokenize_n(model.handle, special.data(), special.size(), GPT_TOKENIZE_SPECIAL, ids.data(), 8,
                                 &n) == GPT_OK);
    CHECK(std::vector<gpt_token>(ids.begin(), ids.begin() + n) ==
          std::vector<gpt_token>{byte_token('\0'), endoftext_id()});
    std::vector<gpt_token> plain(64);
    REQUIRE(gpt_model_tokenize_n(model.handle, special.data(), special.size(), 0, plain.data(), 64, &n) == GPT_OK);
    CHECK(n > 2);  // ordinary text without the flag
    CHECK(std::find(plain.begin(), plain.begin() + n, endoftext_id()) == plain.begin() + n);
    // The arguments: too small a buffer reports the count, empty text is no tokens (NULL allowed), unknown flags.
    CHECK(gpt_model_tokenize_n(model.handle, text.data(), text.size(), 0, ids.data(), 2, &n) ==
          GPT_ERR_BUFFER_TOO_SMALL);
    CHECK(n == 3);
    CHECK(gpt_model_tokenize_n(model.handle, nullptr, 0, 0, nullptr, 0, &n) == GPT_OK);
    CHECK(n == 0);
    CHECK(gpt_model_tokenize_n(model.handle, nullptr, 1, 0, ids.data(), 8, &n) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(gpt_model_tokenize_n(model.handle, text.data(), text.size(), 1u << 5, ids.data(), 8, &n) ==
          GPT_ERR_INVALID_ARGUMENT);
    CHECK(test::error_mentions("flags holds a bit"));
    const std::string bad("a\0\xC3(", 4);
    CHECK(gpt_model_tokenize_n(model.handle, bad.data(), bad.size(), 0, ids.data(), 8, &n) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(test::error_mentions("not valid UTF-8 at byte 2"));
}

TEST_CASE("the detokenizer holds a split character and keeps a token it could not write", "[bpe]") {
    test::Model model(bpe_artifact());
    REQUIRE(model.status == GPT_OK);
    gpt_status s = GPT_OK;
    // No emoji in the corpus: "😀" is its four bytes, one token each.
    const auto ids = tokenize(model.handle, "a😀", false, &s);
    REQUIRE(s == GPT_OK);
    REQUIRE(ids.size() == 5);
    gpt_detokenizer *d = nullptr;
    REQUIRE(gpt_detokenizer_create(model.handle, &d) == GPT_OK);
    CHECK(push(d, ids[0]) == "a");
    CHECK(push(d, ids[1]).empty());
    CHECK(push(d, ids[2]).empty());
    CHECK(push(d, ids[3]).empty());
    char tiny[2];
    size_t size = 0;
    CHECK(gpt_detokenizer_push(d, ids[4], tiny, sizeof tiny, &size) == GPT_ERR_BUFFER_TOO_SMALL);
    CHECK(size == 5);                              // the emoji and the NUL
    CHECK(push(d, ids[4]) == "\xF0\x9F\x98\x80");  // the refused push took nothing: retried, it completes
    // The detokenizer keeps the vocabulary: it works after the model is gone.
    REQUIRE(gpt_model_free(model.handle) == GPT_OK);
    model.handle = nullptr;
    CHECK(push(d, ids[1]).empty());
    char rest[8];
    REQUIRE(gpt_detokenizer_flush(d, rest, sizeof rest, &size) == GPT_OK);
    CHECK(std::string(rest, size - 1) == "\xEF\xBF\xBD");  // an incomplete character at the end: U+FFFD
    CHECK(gpt_detokenizer_free(d) == GPT_OK);
}

TEST_CASE("generation ends at EOS, which is not emitted, unless told to go on", "[bpe]") {
    test::Model model(bpe_artifact());
    REQUIRE(model.status == GPT_OK);
    const gpt_token eos = model.info.eos_token;
    // Random weights: every token, EOS included, is sampled now and then. Find a seed whose
    // free-running sample contains EOS, then run that seed again with the default stop.
    for (uint64_t seed = 0; seed < 400; ++seed) {
        const auto free_running = generate(model.handle, seed, 48, false);
        const auto at = std::find(free_running.begin(), free_running.end(), eos);
        if (at == free_running.end()) continue;
        const auto stopped = generate(model.handle, seed, 48, true);
        INFO("seed " << seed);
        CHECK(stopped == std::vector<gpt_token>(free_running.begin(), at));
        return;
    }
    FAIL("no seed in 400 sampled EOS within 48 tokens");
}

TEST_CASE("training through the runtime on the BPE dataset lowers validation loss by more than 1 nat", "[bpe]") {
    const auto data = bpe_artifact().parent_path().parent_path() / "bible_bpe";
    test::Model model(bpe_artifact());
    REQUIRE(model.status == GPT_OK);
    const int batch = 8, seq = model.info.block_size;
    const cli::TokenFile train((data / "train.bin").string(), seq), val((data / "val.bin").string(), seq);
    gpt_trainer_params p = test::default_trainer_params();
    p.learning_rate = 1e-2f;
    p.min_lr = 1e-3f;
    p.warmup_iters = 10;
    p.lr_decay_iters = 150;
    gpt_trainer *trainer = nullptr;
    REQUIRE(gpt_trainer_create(model.handle, &p, &trainer) == GPT_OK);
    const auto mean_val_loss = [&] {
        std::mt19937_64 rng(99);  // the same batches before and after
        double sum = 0.0;
        for (int i = 0; i < 20; ++i) {
            std::vector<gpt_token> x, y;
            val.sample(rng, batch, seq, &x, &y);
            float loss = 0.0f;
            REQUIRE(gpt_trainer_eval(trainer, x.data(), y.data(), batch, seq, &loss) == GPT_OK);
            sum += loss;
        }
        return sum / 20;
    };
    const double before = mean_val_loss();
    std::mt19937_64 rng(1);
    for (int it = 0; it < 150; ++it) {
        std::vector<gpt_token> x, y;
        train.sample(rng, batch, seq, &x, &y);
        float loss = 0.0f;
        REQUIRE(gpt_trainer_step(trainer, x.data(), y.data(), batch, seq, 1, &loss) == GPT_OK);
    }
    const double after = mean_val_loss();
    gpt_trainer_free(trainer);
    INFO("val loss " << before << " -> " << after);
    CHECK(before - after > 1.0);
}
