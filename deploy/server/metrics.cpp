// metrics.cpp — see metrics.h.
#include "metrics.h"

#include <unistd.h>

#include <array>
#include <charconv>
#include <fstream>
#include <sstream>
#include <system_error>

namespace server {

namespace {

std::string label_value(const std::string &s) {
    std::string out;
    for (char c : s) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out;
}

// The shortest text that reads back as exactly `value` (a stream's default 6 significant digits would freeze a
// histogram's _sum once it passes ~1e6, a day of token latencies), in plain decimals as bounds are written
// (0.0001, not 1e-04) unless that takes more than 64 characters.
std::string exact(double value) {
    std::array<char, 64> text{};
    auto result = std::to_chars(text.data(), text.data() + text.size(), value, std::chars_format::fixed);
    if (result.ec != std::errc()) result = std::to_chars(text.data(), text.data() + text.size(), value);
    return std::string(text.data(), result.ptr);
}

void header(std::ostringstream &out, const char *name, const char *type, const char *help) {
    out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}

}  // namespace

uint64_t resident_memory_bytes() {
    std::ifstream statm("/proc/self/statm");
    uint64_t size_pages = 0, resident_pages = 0;
    if (!(statm >> size_pages >> resident_pages)) return 0;
    return resident_pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
    size_t i = 0;
    while (i < bounds_.size() && value > bounds_[i]) ++i;
    ++counts_[i];
    sum_ += value;
    ++count_;
}

std::string Histogram::render(const std::string &name) const {
    std::ostringstream out;
    uint64_t cumulative = 0;
    for (size_t i = 0; i < bounds_.size(); ++i) {
        cumulative += counts_[i];
        out << name << "_bucket{le=\"" << exact(bounds_[i]) << "\"} " << cumulative << '\n';
    }
    out << name << "_bucket{le=\"+Inf\"} " << count_ << '\n';
    out << name << "_sum " << exact(sum_) << '\n' << name << "_count " << count_ << '\n';
    return out.str();
}

Metrics::Metrics()
    : time_to_first_token_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}),
      token_latency_({0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}),
      request_duration_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      queue_wait_({0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      batch_size_({1, 2, 4, 8, 16, 32, 64}) {}

void Metrics::count_request(const std::string &endpoint, int code) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++requests_[{endpoint, code}];
}

void Metrics::count_tokens(uint64_t n) {
    std::lock_guard<std::mutex> lock(mutex_);
    tokens_ += n;
}

void Metrics::count_prompt_tokens(const std::string &how, uint64_t n) {
    std::lock_guard<std::mutex> lock(mutex_);
    prompt_tokens_[how] += n;
}

void Metrics::count_reload(bool ok) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++(ok ? reloads_ok_ : reloads_failed_);
}

void Metrics::observe(Histogram &histogram, double value) {
    std::lock_guard<std::mutex> lock(mutex_);
    histogram.observe(value);
}

void Metrics::observe_time_to_first_token(double seconds) { observe(time_to_first_token_, seconds); }
void Metrics::observe_token_latency(double seconds) { observe(token_latency_, seconds); }
void Metrics::observe_request_duration(double seconds) { observe(request_duration_, seconds); }
void Metrics::observe_queue_wait(double seconds) { observe(queue_wait_, seconds); }
void Metrics::observe_batch_size(double sequences) { observe(batch_size_, sequences); }

std::string Metrics::render(const Gauges &gauges) const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::ostringstream out;
    header(out, "gpt_requests_total", "counter", "HTTP requests by endpoint and status code.");
    for (const auto &[key, n] : requests_)
        out << "gpt_requests_total{endpoint=\"" << label_value(key.first) << "\",code=\"" << key.second << "\"} " << n
            << '\n';
    header(out, "gpt_tokens_generated_total", "counter", "Tokens generated.");
    out << "gpt_tokens_generated_total " << tokens_ << '\n';
    header(out, "gpt_prompt_tokens_total", "counter",
           "Prompt tokens by how they entered the cache: reused, prefilled, extended, stepped with the decode.");
    for (const char *how : {"cached", "prefill", "extend", "step"}) {
        const auto it = prompt_tokens_.find(how);
        out << "gpt_prompt_tokens_total{how=\"" << how << "\"} " << (it == prompt_tokens_.end() ? 0 : it->second)
            << '\n';
    }
    header(out, "gpt_model_reloads_total", "counter", "Model reloads by result.");
    out << "gpt_model_reloads_total{result=\"ok\"} " << reloads_ok_ << '\n';
    out << "gpt_model_reloads_total{result=\"failed\"} " << reloads_failed_ << '\n';
    header(out, "gpt_requests_active", "gauge", "Generations running now.");
    out << "gpt_requests_active " << gauges.active << '\n';
    header(out, "gpt_queue_depth", "gauge", "Generation requests waiting for a slot.");
    out << "gpt_queue_depth " << gauges.queued << '\n';
    header(out, "gpt_slots", "gauge", "Sequences the current model's scheduler decodes together (--parallel).");
    out << "gpt_slots " << gauges.slots << '\n';
    header(out, "gpt_slots_in_use", "gauge", "Of those, slots holding a request now.");
    out << "gpt_slots_in_use " << gauges.slots_in_use << '\n';
    header(out, "gpt_model_info", "gauge", "The model serving new requests.");
    out << "gpt_model_info{name=\"" << label_value(gauges.model_name) << "\"} 1\n";
    header(out, "gpt_model_weights_bytes", "gauge", "The model's weights, with their copies packed for oneDNN.");
    out << "gpt_model_weights_bytes " << gauges.memory.weights_bytes << '\n';
    header(out, "gpt_device_memory_bytes", "gauge",
           "The model's GPU: in live tensors, their peak, held from the driver.");
    out << "gpt_device_memory_bytes{kind=\"allocated\"} " << gauges.memory.device_allocated_bytes << '\n';
    out << "gpt_device_memory_bytes{kind=\"peak\"} " << gauges.memory.device_peak_bytes << '\n';
    out << "gpt_device_memory_bytes{kind=\"reserved\"} " << gauges.memory.device_reserved_bytes << '\n';
    header(out, "process_resident_memory_bytes", "gauge", "Resident memory of the server process.");
    out << "process_resident_memory_bytes " << gauges.resident_bytes << '\n';
    header(out, "gpt_process_peak_resident_memory_bytes", "gauge", "Highest resident memory of the server process.");
    out << "gpt_process_peak_resident_memory_bytes " << gauges.memory.host_peak_rss_bytes << '\n';
    header(out, "gpt_time_to_first_token_seconds", "histogram",
           "From the request's arrival (queueing included) to the first generated token.");
    out << time_to_first_token_.render("gpt_time_to_first_token_seconds");
    header(out, "gpt_token_latency_seconds", "histogram", "Time between consecutive generated tokens.");
    out << token_latency_.render("gpt_token_latency_seconds");
    header(out, "gpt_request_duration_seconds", "histogram", "Generation requests from arrival to the last byte.");
    out << request_duration_.render("gpt_request_duration_seconds");
    header(out, "gpt_queue_wait_seconds", "histogram",
           "From a request's admission to its prefill (waiting for a slot).");
    out << queue_wait_.render("gpt_queue_wait_seconds");
    header(out, "gpt_batch_size", "histogram", "Sequences stepped together per decode step.");
    out << batch_size_.render("gpt_batch_size");
    return out.str();
}

}  // namespace server
