// readiness.h — what GET /readyz answers, on the main port and the health port:
// 200 only while a verified model is loaded, its device has not failed (the
// scheduler saw GPT_ERR_CUDA), the server is not draining, and the main port can
// take a generation now (not saturated: a worker free, the connection cap not
// reached, a slot or a queue place free).
#pragma once

#include <string>

namespace server {

struct Readiness {
    int status;
    std::string text;  // the reply's body
};

// `model_name` is null when no model is loaded.
inline Readiness readiness(const char *model_name, bool device_failed, bool draining, bool saturated) {
    if (model_name == nullptr) return {503, "no model loaded\n"};
    // A CUDA error sticks to the process's context: a reload verifies its golden vector on the device,
    // so only a model that passes it (a new scheduler) serves again.
    if (device_failed) return {503, "the device failed (CUDA error): restart the server\n"};
    if (draining) return {503, "draining\n"};
    // Passing: a load balancer sends the next request elsewhere, and back here once a slot frees.
    if (saturated) return {503, "saturated: every slot and queue place (or worker, or connection) is taken\n"};
    return {200, "ready: " + std::string(model_name) + "\n"};
}

}  // namespace server
