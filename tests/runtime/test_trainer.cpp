// Training through the C ABI against a nanoGPT-style eager PyTorch run
// (tests/fixtures/build_artifacts.py: reference_training).
#include <ATen/TensorIndexing.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/equal.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "dataset.h"
#include "exec/model.h"
#include "test_support.h"

namespace {

struct Trainer {
    gpt_trainer *handle = nullptr;
    Trainer(gpt_model *model, const gpt_trainer_params &p) {
        REQUIRE(gpt_trainer_create(model, &p, &handle) == GPT_OK);
    }
    ~Trainer() { gpt_trainer_free(handle); }
};

std::vector<gpt_token> ids(const at::Tensor &t) {
    const at::Tensor c = t.to(at::kInt).contiguous();
    return std::vector<gpt_token>(c.data_ptr<int32_t>(), c.data_ptr<int32_t>() + c.numel());
}

const at::Tensor &weight(const test::Model &m, const std::string &name) { return m.handle->impl->weight(name); }

}  // namespace

TEST_CASE("compiled training steps reproduce nanoGPT's eager loop", "[trainer]") {
    const auto ref =
        test::read_safetensors(test::artifact("math").parent_path().parent_path() / "reference_train.safetensors");
    test::Model model(test::artifact("math"));
    REQUIRE(model.status == GPT_OK);
    Trainer trainer(model.handle, test::reference_trainer_params());

    const at::Tensor x = ref.at("x"), y = ref.at("y");  // (steps, accum, batch, seq)
    const auto steps = x.size(0), accum = x.size(1), batch = x.size(2), seq = x.size(3);
    for (int64_t it = 0; it < steps; ++it) {
        const auto xs = ids(x[it]), ys = ids(y[it]);
        float loss = 0.0f;
        REQUIRE(gpt_trainer_step(trainer.handle, xs.data(), ys.data(), static_cast<int32_t>(batch),
                                 static_cast<int32_t>(seq), static_cast<int32_t>(accum), &loss) == GPT_OK);
        CHECK(loss == Approx(ref.at("losses")[it].item<double>()).epsilon(1e-5));
    }
    gpt_trainer_state state;
    REQUIRE(gpt_trainer_get_state(trainer.handle, &state, sizeof state) == GPT_OK);
    CHECK(state.iteration == steps);
    CHECK(state.grad_norm > 0.0f);

    // Every parameter after the run, within fp32 noise of eager AdamW.
    for (const auto &[key, expected] : ref) {
        if (key.rfind("final.", 0) != 0) continue;
        const at::Tensor actual = weight(model, key.substr(6));
        INFO(key);
        CHECK((actual - expected).abs().max().item<double>() < 2e-5);
    }

    // Inference graphs share the weights: they see the trained model without a reload.
    test::Session session(model.handle);
    const auto prompt = ids(ref.at("prompt"));
    std::vector<float> logits(static_cast<size_t>(model.info.vocab_size));
    REQUIRE(gpt_session_prefill(session.handle, prompt.data(), static_cast<int32_t>(prompt.size()), logits.data()) ==
            GPT_OK);
    const at::Tensor expected_logits = ref.at("prompt_logits");
    for (size_t i = 0; i < logits.size(); ++i)
        CHECK(logits[i] == Approx(expected_logits[static_cast<int64_t>(i)].item<float>()).margin(1e-4));

    float eval_loss = 0.0f;
    const auto x0 = ids(x[0][0]), y0 = ids(y[0][0]);
    REQUIRE(gpt_trainer_eval(trainer.handle, x0.data(), y0.data(), static_cast<int32_t>(batch),
                             static_cast<int32_t>(seq), &eval_loss) == GPT_OK);
    CHECK(eval_loss == Approx(ref.at("eval_loss").item<double>()).epsilon(1e-5));
}

namespace {

// sqrt(sum over the trained tensors of |a[prefix_a + name] - b[prefix_b + name]|^2)
double distance(const std::map<std::string, at::Tensor> &a, const std::string &prefix_a,
                const std::map<std::string, at::Tensor> &b, const std::string &prefix_b,
                const std::vector<std::string> &names) {
    double sum = 0.0;
    for (const auto &name : names)
        sum +=
            (a.at(prefix_a + name).to(at::kDouble) - b.at(prefix_b + name).to(at::kDouble)).pow(2).sum().item<double>();
    return std::sqrt(sum);
}

}  // namespace

// tests/fixtures/build_artifacts.py: reference_bf16_training. The same bf16 weights and batches,
// trained by eager PyTorch in fp32, in pure bf16 (weights and AdamW state), and over fp32 masters;
// our runtime trains tiny-bf16-train. Distances are relative to how far fp32 training moved the weights.
TEST_CASE("a bf16 model trains over fp32 master weights: it tracks fp32 training where pure bf16 drifts",
          "[trainer][bf16]") {
    const auto root = test::artifact("math").parent_path().parent_path();
    const auto ref = test::read_safetensors(root / "reference_bf16_train.safetensors");
    test::Model model(test::artifact("bf16-train"), 1, 1);
    REQUIRE(model.status == GPT_OK);
    const auto &names = model.handle->impl->manifest().training->param_names;
    REQUIRE(model.handle->impl->manifest().dtype == "bfloat16");
    REQUIRE(model.handle->impl->manifest().training->master_dtype == "float32");
    gpt_trainer_params p = test::default_trainer_params();
    p.learning_rate = static_cast<float>(ref.at("lr").item<double>());
    p.decay_lr = false;
    Trainer trainer(model.handle, p);

    const at::Tensor x = ref.at("x"), y = ref.at("y");  // (steps, batch, seq)
    for (int64_t it = 0; it < x.size(0); ++it) {
        const auto xs = ids(x[it]), ys = ids(y[it]);
        float loss = 0.0f;
        REQUIRE(gpt_trainer_step(trainer.handle, xs.data(), ys.data(), static_cast<int32_t>(x.size(1)),
                                 static_cast<int32_t>(x.size(2)), 1, &loss) == GPT_OK);
    }
    // The masters, as the checkpoint stores them; the model's weights are them rounded to bf16.
    const auto path = std::filesystem::temp_directory_path() / ("gpt_bf16_masters_" + std::to_string(getpid()));
    REQUIRE(gpt_trainer_save(trainer.handle, path.c_str()) == GPT_OK);
    const auto saved = test::read_safetensors(path);
    std::filesystem::remove(path);
    std::map<std::string, at::Tensor> weights;
    for (const auto &name : names) {
        INFO(name);
        const at::Tensor &master = saved.at("param." + name);
        REQUIRE(master.scalar_type() == at::kFloat);
        CHECK(saved.at("exp_avg." + name).scalar_type() == at::kFloat);
        CHECK(at::equal(weight(model, name), master.to(at::kBFloat16)));
        weights["weights." + name] = weight(model, name).to(at::kFloat);
    }

    const double travelled = distance(ref, "fp32.", ref, "init.", names);
    const double ours = distance(saved, "param.", ref, "fp32.", names) / travelled;
    const double ours_rounded = distance(weights, "weights.", ref, "fp32.", names) / travelled;
    const double pure_bf16 = distance(ref, "bf16.", ref, "fp32.", names) / travelled;
    const double eager_masters = distance(ref, "master.", ref, "fp32.", names) / travelled;
    WARN("distance from fp32 training / fp32's travel "
         << travelled << ": ours (masters) " << ours << ", ours (bf16 weights) " << ours_rounded << ", eager masters "
         << eager_masters << ", pure bf16 " << pure_bf16);
    // Measured on this host: ours 0.030 (eager masters 0.034, the bf16 compute's own noise), ours rounded to
    // bf16 0.094, pure bf16 0.50 (it keeps few of the updates fp32 makes).
    CHECK(pure_bf16 > 0.3);  // else this learning rate shows nothing
    CHECK(ours < 0.1);
    CHECK(ours * 5 < pure_bf16);
    CHECK(ours_rounded * 3 < pure_bf16);
}

TEST_CASE("k accumulated micro-batches equal one batch k times as large", "[trainer]") {
    const int32_t batch = 2, seq = 12, accum = 3;
    std::vector<gpt_token> x(static_cast<size_t>(batch * seq * accum)), y(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
        x[i] = static_cast<gpt_token>((i * 7 + 3) % 90);
        y[i] = static_cast<gpt_token>((i * 13 + 5) % 90);
    }
    gpt_trainer_params p = test::reference_trainer_params();
    test::Model accumulated(test::artifact("math")), whole(test::artifact("math"));
    REQUIRE(accumulated.status == GPT_OK);
    REQUIRE(whole.status == GPT_OK);
    Trainer a(accumulated.handle, p), b(whole.handle, p);
    float loss_a = 0.0f, loss_b = 0.0f;
    for (int step = 0; step < 2; ++step) {
        REQUIRE(gpt_trainer_step(a.handle, x.data(), y.data(), batch, seq, accum, &loss_a) == GPT_OK);
        REQUIRE(gpt_trainer_step(b.handle, x.data(), y.data(), batch * accum, seq, 1, &loss_b) == GPT_OK);
        CHECK(loss_a == Approx(loss_b).epsilon(1e-5));
    }
    for (const auto &name : accumulated.handle->impl->manifest().training->param_names) {
        INFO(name);
        CHECK((weight(accumulated, name) - weight(whole, name)).abs().max().item<double>() < 1e-5);
    }
}

TEST_CASE("a non-finite loss stops the step with GPT_ERR_NON_FINITE and changes nothing", "[trainer]") {
    test::Model model(test::artifact("math"));
    REQUIRE(model.status == GPT_OK);
    Trainer trainer(model.handle, test::reference_trainer_params());
    const int32_t batch = 2, seq = 8;
    std::vector<gpt_token> x(batch * seq, 5), y(batch * seq, -1);  // every target ignored: 0/0 loss
    const at::Tensor before = weight(model, "transformer.h.0.attn.c_attn.weight").clone();
    float loss = 123.0f;
    CHECK(gpt_trainer_step(trainer.handle, x.data(), y.data(), batch, seq, 1, &loss) == GPT_ERR_NON_FINITE);
    CHECK(loss == 123.0f);
    CHECK(std::string(gpt_runtime_last_error()).find("loss is") != std::string::npos);
    CHECK(at::equal(before, weight(model, "transformer.h.0.attn.c_attn.weight")));

    // NaN in a weight: the step is refused and no tensor is updated.
    at::Tensor gain = weight(model, "transformer.ln_f.weight");  // shares storage with the model
    gain.index_put_({0}, NAN);
    std::fill(y.begin(), y.end(), 3);
    CHECK(gpt_trainer_step(trainer.handle, x.data(), y.data(), batch, seq, 1, &loss) == GPT_ERR_NON_FINITE);
    CHECK(at::equal(before, weight(model, "transformer.h.0.attn.c_attn.weight")));
    gpt_trainer_state state;
    REQUIRE(gpt_trainer_get_state(trainer.handle, &state, sizeof state) == GPT_OK);
    CHECK(state.iteration == 0);
}

TEST_CASE("trainer arguments are checked", "[trainer]") {
    test::Model inference_only(test::artifact("flash"));
    REQUIRE(inference_only.status == GPT_OK);
    gpt_trainer *t = nullptr;
    CHECK(gpt_trainer_create(inference_only.handle, nullptr, &t) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(std::string(gpt_runtime_last_error()).find("--train") != std::string::npos);

    test::Model model(test::artifact("math"));
    REQUIRE(model.status == GPT_OK);
    Trainer trainer(model.handle, test::reference_trainer_params());
    // The trainer shares the model: the handle goes, the model stays for the trainer, which frees it.
    CHECK(gpt_model_free(model.handle) == GPT_OK);
    model.handle = nullptr;
    std::vector<gpt_token> x(64, 1), y(64, 2);
    float loss = 0.0f;
    CHECK(gpt_trainer_step(trainer.handle, x.data(), y.data(), 2, 1, 1, &loss) == GPT_ERR_OUT_OF_RANGE);
    CHECK(gpt_trainer_step(trainer.handle, x.data(), y.data(), 2, 8, 0, &loss) == GPT_ERR_INVALID_ARGUMENT);
    CHECK(gpt_trainer_step(trainer.handle, x.data(), y.data(), 0, 8, 1, &loss) == GPT_ERR_INVALID_ARGUMENT);
    x[3] = model.info.vocab_size;
    CHECK(gpt_trainer_step(trainer.handle, x.data(), y.data(), 2, 8, 1, &loss) == GPT_ERR_OUT_OF_RANGE);
    CHECK(gpt_trainer_step(trainer.handle, nullptr, y.data(), 2, 8, 1, &loss) == GPT_ERR_INVALID_ARGUMENT);
    x[3] = 1;
    CHECK(gpt_trainer_step(trainer.handle, x.data(), y.data(), 2, 8, 1, &loss) == GPT_OK);
    CHECK(std::isfinite(loss));
}

namespace {

float mean_eval_loss(gpt_trainer *trainer, const cli::TokenFile &corpus, int batch, int seq) {
    std::mt19937_64 rng(99);  // the same batches before and after training
    std::vector<gpt_token> x, y;
    double sum = 0.0;
    for (int i = 0; i < 20; ++i) {
        x.clear();
        y.clear();
        corpus.sample(rng, batch, seq, &x, &y);
        float loss = 0.0f;
        REQUIRE(gpt_trainer_eval(trainer, x.data(), y.data(), batch, seq, &loss) == GPT_OK);
        sum += loss;
    }
    return static_cast<float>(sum / 20);
}

}  // namespace

TEST_CASE("training on the real corpus lowers validation loss by more than 1.5 nats", "[trainer]") {
    const auto corpus_dir = test::artifact("math").parent_path().parent_path() / "corpus";
    test::Model model(test::artifact("math"));
    REQUIRE(model.status == GPT_OK);
    const int batch = 8, seq = model.info.block_size;
    // The gpt CLI's loader (nanoGPT's get_batch), so the test trains on what `gpt train` feeds.
    const cli::TokenFile train((corpus_dir / "train.bin").string(), seq), val((corpus_dir / "val.bin").string(), seq);
    gpt_trainer_params p = test::default_trainer_params();
    p.learning_rate = 1e-2f;
    p.min_lr = 1e-3f;
    p.warmup_iters = 10;
    p.lr_decay_iters = 150;
    Trainer trainer(model.handle, p);
    const float before = mean_eval_loss(trainer.handle, val, batch, seq);
    std::mt19937_64 rng(1);
    std::vector<gpt_token> x, y;
    for (int it = 0; it < 150; ++it) {
        x.clear();
        y.clear();
        train.sample(rng, batch, seq, &x, &y);
        float loss = 0.0f;
        REQUIRE(gpt_trainer_step(trainer.handle, x.data(), y.data(), batch, seq, 1, &loss) == GPT_OK);
    }
    const float after = mean_eval_loss(trainer.handle, val, batch, seq);
    INFO("val loss " << before << " -> " << after);
    CHECK(before - after > 1.5f);
}

TEST_CASE("a token file's windows: every start whose targets fit, the last included", "[trainer][dataset]") {
    const std::string path = (std::filesystem::temp_directory_path() / "gpt_dataset_windows.bin").string();
    const auto write_tokens = [&](uint16_t n) {
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        for (uint16_t i = 0; i < n; ++i) out.write(reinterpret_cast<const char *>(&i), sizeof i);
    };
    const int32_t seq = 4;
    write_tokens(seq);  // no room for the last target
    CHECK_THROWS_WITH(cli::TokenFile(path, seq), Catch::Contains("fewer tokens than one window of 5"));

    write_tokens(seq + 1);  // exactly one window: x = 0..3, y = 1..4
    std::mt19937_64 rng(1);
    std::vector<gpt_token> x, y;
    cli::TokenFile(path, seq).sample(rng, 1, seq, &x, &y);
    CHECK(x == std::vector<gpt_token>{0, 1, 2, 3});
    CHECK(y == std::vector<gpt_token>{1, 2, 3, 4});

    write_tokens(seq + 3);  // starts 0, 1, 2 (token ids equal their positions)
    const cli::TokenFile file(path, seq);
    std::set<gpt_token> starts;
    for (int i = 0; i < 200; ++i) {
        x.clear();
        y.clear();
        file.sample(rng, 1, seq, &x, &y);
        starts.insert(x.front());
        CHECK(y.back() <= seq + 2);
    }
    CHECK(starts == std::set<gpt_token>{0, 1, 2});
    std::filesystem::remove(path);
}
