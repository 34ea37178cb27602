// probes.cpp — GET /healthz, /readyz and /metrics of HttpServer (http_server.h), on the main port and the
// health port.
#include "api/http_server.h"
#include "api/readiness.h"

namespace server {

void HttpServer::add_probe_routes(http::Router &router) {
    using http::RunsOn;
    router.add("GET", "/healthz", RunsOn::io_thread, [this](const http::Request &, http::Response &res) {
        res.status = 200;
        res.set_content("ok\n", "text/plain");
        metrics_.count_request("/healthz", 200);
    });
    router.add("GET", "/readyz", RunsOn::io_thread,
               [this](const http::Request &, http::Response &res) { readyz(res); });
    router.add("GET", "/metrics", RunsOn::io_thread,
               [this](const http::Request &, http::Response &res) { serve_metrics(res); });
}

void HttpServer::readyz(http::Response &res) {
    const auto model = slot_.current();
    // Saturated: a generation sent now would wait for a worker or be refused (429), so a load balancer
    // should send it elsewhere.
    const bool saturated = main_->saturated() || admission_.full();
    const Readiness r = readiness(model ? model->info.name : nullptr, model && model->scheduler->device_failed(),
                                  admission_.draining(), saturated);
    res.status = r.status;
    res.set_content(r.text, "text/plain");
    metrics_.count_request("/readyz", res.status);
}

void HttpServer::serve_metrics(http::Response &res) {
    Gauges g;
    g.slots = options_.parallel;
    if (const auto model = slot_.current()) {
        g.slots_in_use = model->scheduler->slots_in_use();
        g.active = g.slots_in_use;
        g.queued = model->scheduler->waiting();
        g.model_name = model->info.name;
        if (gpt_model_get_memory(model->model, &g.memory, sizeof g.memory) != GPT_OK) g.memory = {};
    }
    g.resident_bytes = resident_memory_bytes();
    res.status = 200;
    res.set_content(metrics_.render(g), "text/plain; version=0.0.4");
    metrics_.count_request("/metrics", 200);
}

}  // namespace server
