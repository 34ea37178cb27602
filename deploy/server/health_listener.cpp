// health_listener.cpp — see health_listener.h.
#include "health_listener.h"

#include <chrono>

namespace server {

namespace {

// Probes are quick and their connections wait between requests without a worker: a few suffice, and
// more than one keeps a prober's slow request from delaying another's.
constexpr size_t kProbeThreads = 4;

}  // namespace

HealthListener::HealthListener(const RequestLimits &limits, const std::function<void(httplib::Server &)> &add_routes)
    : http_(limits, kProbeThreads) {
    http_.set_read_timeout(5);
    http_.set_write_timeout(5);
    add_routes(http_);
}

HealthListener::~HealthListener() { stop(); }

int HealthListener::bind(const std::string &host, int port) {
    if (port == 0) return http_.bind_to_any_port(host);
    return http_.bind_to_port(host, port) ? port : -1;
}

void HealthListener::start() {
    thread_ = std::thread([this] { http_.listen_after_bind(); });
    // httplib's stop() does nothing before the loop runs: wait for it, so that an early stop() is not lost.
    for (int i = 0; i < 5000 && !http_.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void HealthListener::stop() {
    http_.stop();
    if (thread_.joinable()) thread_.join();
}

}  // namespace server
