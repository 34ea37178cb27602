// metrics.h — the server's counters and latency histograms, rendered in the
// Prometheus text exposition format for GET /metrics.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "gpt_runtime.h"

namespace server {

// Cumulative histogram with fixed upper bounds (seconds), as Prometheus expects.
class Histogram {
public:
    explicit Histogram(std::vector<double> bounds);
    void observe(double value);
    // `name`_bucket{le=...}, `name`_sum and `name`_count lines.
    std::string render(const std::string &name) const;

private:
    std::vector<double> bounds_;
    std::vector<uint64_t> counts_;  // per bucket, not cumulative; the last is +Inf
    double sum_ = 0.0;
    uint64_t count_ = 0;
};

struct Gauges {
    int active = 0;  // requests holding a slot (admitted), with the slots the scheduler has
    int queued = 0;
    int slots = 0;                // the current model's --parallel
    int slots_in_use = 0;         // of them, decoding a request now
    std::string model_name;       // its manifest's name: metrics are unauthenticated, so never its directory
    gpt_memory_stats memory{};    // the current model's (device figures: its GPU's, 0 on CPU)
    uint64_t resident_bytes = 0;  // the whole process's, every model loaded in it included
};

// The process's resident set (/proc/self/statm), 0 where it cannot be read.
uint64_t resident_memory_bytes();

class Metrics {
public:
    Metrics();
    void count_request(const std::string &endpoint, int code);
    void count_tokens(uint64_t n);
    void count_reload(bool ok);
    // Prompt tokens by how they entered the cache: "cached" (reused from a slot), "prefill" (a batched prefill),
    // "extend" (an extend call of one sequence), "step" (a row of a decode step beside the running sequences).
    void count_prompt_tokens(const std::string &how, uint64_t n);
    void observe_time_to_first_token(double seconds);
    void observe_token_latency(double seconds);
    void observe_request_duration(double seconds);
    void observe_queue_wait(double seconds);
    void observe_batch_size(double sequences);
    std::string render(const Gauges &gauges) const;

private:
    void observe(Histogram &histogram, double value);  // takes mutex_

    mutable std::mutex mutex_;
    std::map<std::pair<std::string, int>, uint64_t> requests_;
    uint64_t tokens_ = 0;
    std::map<std::string, uint64_t> prompt_tokens_;
    uint64_t reloads_ok_ = 0;
    uint64_t reloads_failed_ = 0;
    Histogram time_to_first_token_;
    Histogram token_latency_;
    Histogram request_duration_;
    Histogram queue_wait_;
    Histogram batch_size_;
};

}  // namespace server
