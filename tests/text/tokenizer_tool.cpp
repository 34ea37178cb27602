// tokenizer_tool — the runtime's tokenizer (runtime/text) over JSON lines, for
// tests/text/test_bpe.py, which compares it with tiktoken and HF tokenizers.
//
//   tokenizer_tool TOKENIZER_JSON KIND VOCAB_SIZE < lines
//
// Each input line is {"text": str, "special": bool, "ids_only": bool}; each output line is
// {"ids": [...], "decoded": str, "streamed": str, "broken_pieces": n} or {"error": str, "status": str}:
// `decoded` is decode(ids), `streamed` what Utf8Stream gave fed one token at a
// time, `broken_pieces` how many of its outputs were not valid UTF-8 on their own.
// With "ids_only" the reply is {"ids": [...]} (tests/text/test_unicode_sweep.py's megabytes).
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "base/error.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace {

using nlohmann::json;

json run(const gpt::Tokenizer &tokenizer, const json &request) {
    const std::string text = request.at("text").get<std::string>();
    const std::vector<gpt_token> ids = tokenizer.encode(text, request.value("special", false));
    if (request.value("ids_only", false)) return {{"ids", ids}};
    gpt::Utf8Stream stream;
    std::string streamed;
    int broken = 0;
    for (const gpt_token id : ids) {
        const std::string out = stream.push(tokenizer.token_bytes(id));
        broken += gpt::first_invalid_utf8(out) != std::string::npos;
        streamed += out;
    }
    streamed += stream.flush();
    return {{"ids", ids},
            {"decoded", tokenizer.decode(ids.data(), ids.size())},
            {"streamed", streamed},
            {"broken_pieces", broken}};
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 4) {
        std::cerr << "usage: tokenizer_tool TOKENIZER_JSON KIND VOCAB_SIZE < json-lines\n";
        return 2;
    }
    std::ifstream file(argv[1], std::ios::binary);
    std::stringstream contents;
    contents << file.rdbuf();
    try {
        const gpt::Tokenizer tokenizer(contents.str(), argv[2], std::stoi(argv[3]));
        std::string line;
        while (std::getline(std::cin, line)) {
            json reply;
            try {
                reply = run(tokenizer, json::parse(line));
            } catch (const gpt::Error &e) {
                reply = {{"error", e.what()}, {"status", gpt::status_name(e.status())}};
            }
            std::cout << reply.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
        }
    } catch (const gpt::Error &e) {
        std::cout << json{{"error", e.what()}, {"status", gpt::status_name(e.status())}}.dump() << '\n';
        return 1;
    }
    return 0;
}
