// token_endpoints.cpp — GET /v1/models, POST /tokenize and POST /detokenize of HttpServer (http_server.h).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/completion_request.h"
#include "api/generate.h"
#include "api/http_server.h"
#include "api/reply.h"

namespace server {

using nlohmann::json;

void HttpServer::models(http::Response &res) {
    const auto model = slot_.current();
    json data = json::array();
    if (model)
        data.push_back({{"id", model->info.name},
                        {"object", "model"},
                        {"created", 0},
                        {"owned_by", "gpt-aot"},
                        {"max_model_len", model->info.block_size}});
    res.status = 200;
    res.set_content(json_text({{"object", "list"}, {"data", data}}), kJson);
    metrics_.count_request("/v1/models", 200);
}

void HttpServer::handle_tokenize(const http::Request &req, http::Response &res) {
    const auto model = slot_.current();
    try {
        if (!model) throw BadRequest("no model is loaded", "", 503);
        const std::string text = parse_tokenize_request(req.body);
        const std::vector<gpt_token> tokens = text.empty() ? std::vector<gpt_token>{} : tokenize_prompt(*model, text);
        res.status = 200;
        res.set_content(
            json_text({{"tokens", tokens}, {"count", tokens.size()}, {"max_model_len", model->info.block_size}}),
            kJson);
    } catch (const BadRequest &e) {
        reply_bad_request(res, e);
    }
    metrics_.count_request("/tokenize", res.status);
}

void HttpServer::handle_detokenize(const http::Request &req, http::Response &res) {
    const auto model = slot_.current();
    try {
        if (!model) throw BadRequest("no model is loaded", "", 503);
        const std::vector<gpt_token> tokens = parse_detokenize_request(req.body);
        res.status = 200;
        res.set_content(json_text({{"prompt", detokenize(*model, tokens)}}), kJson);
    } catch (const BadRequest &e) {
        reply_bad_request(res, e);
    }
    metrics_.count_request("/detokenize", res.status);
}

}  // namespace server
