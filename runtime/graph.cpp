// graph.cpp — AOTIModelPackageLoader behind a small interface.
#include "graph.h"

#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "error.h"
#include "log.h"

namespace gpt {

namespace {

// A directory only this process can write, removed on scope exit.
class PrivateTempDir {
public:
    PrivateTempDir() {
        const char *base = std::getenv("TMPDIR");
        std::string templ = std::string(base && *base ? base : "/tmp") + "/gpt_runtime.XXXXXX";
        if (mkdtemp(templ.data()) == nullptr) fail(GPT_ERR_INTERNAL, "cannot create a temporary directory in " + templ);
        path_ = templ;
    }
    ~PrivateTempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    const std::filesystem::path &path() const { return path_; }

private:
    std::filesystem::path path_;
};

}  // namespace

Graph::Graph(std::string name, const Bytes &package, int num_runners) : name_(std::move(name)) {
    PrivateTempDir dir;
    const auto file = dir.path() / (name_ + ".pt2");
    {
        std::ofstream out(file, std::ios::binary);
        out.write(reinterpret_cast<const char *>(package.data()), static_cast<std::streamsize>(package.size()));
        if (!out) fail(GPT_ERR_INTERNAL, "cannot write " + file.string());
    }
    try {
        loader_ = std::make_unique<torch::inductor::AOTIModelPackageLoader>(file.string(), "model", false,
                                                                            static_cast<size_t>(num_runners));
    } catch (const std::exception &e) {
        fail(GPT_ERR_ARTIFACT_INVALID, "graph '" + name_ + "' failed to load: " + e.what());
    }
    log(GPT_LOG_DEBUG, "loaded graph " + name_ + " (" + std::to_string(num_runners) + " runner(s))");
}

Graph::~Graph() = default;

void Graph::bind(const std::map<std::string, at::Tensor> &weights) {
    std::unordered_map<std::string, at::Tensor> constants;
    for (const std::string &fqn : loader_->get_constant_fqns()) {
        auto it = weights.find(fqn);
        if (it == weights.end())
            fail(GPT_ERR_ARTIFACT_INVALID, "graph '" + name_ + "' needs weight '" + fqn + "', which the weights file lacks");
        constants.emplace(fqn, it->second);
    }
    loader_->load_constants(constants, /*use_inactive=*/false, /*check_full_update=*/true, /*user_managed=*/true);
    log(GPT_LOG_DEBUG, "bound " + std::to_string(constants.size()) + " weights to graph " + name_);
}

std::vector<at::Tensor> Graph::run(const std::vector<at::Tensor> &inputs) const { return loader_->run(inputs); }

}  // namespace gpt
