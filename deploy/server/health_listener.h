// health_listener.h — a second listener (--health-port) with its own threads for
// /healthz, /readyz and /metrics: probes keep their answer time when the main port
// is saturated by requests being read or generated (every worker there busy), which
// parking idle connections (idle_connections.h) does not prevent. It serves nothing
// else, so a firewall can open it to the prober alone.
#pragma once

#include <functional>
#include <string>
#include <thread>

#include "guarded_server.h"

namespace server {

class HealthListener {
public:
    // `add_routes` registers the probe routes on this listener's server.
    HealthListener(const RequestLimits &limits, const std::function<void(httplib::Server &)> &add_routes);
    ~HealthListener();  // stop()
    HealthListener(const HealthListener &) = delete;
    HealthListener &operator=(const HealthListener &) = delete;

    // Binds host:port (0 = any free one) and returns the port; -1 on failure.
    int bind(const std::string &host, int port);
    // Serves on its own thread until stop().
    void start();
    void stop();

private:
    GuardedServer http_;
    std::thread thread_;
};

}  // namespace server
