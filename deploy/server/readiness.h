// readiness.h — what GET /readyz answers, on the main port and the health port:
// 200 only while a verified model is loaded, its device has not failed, and the
// server is not draining.
#pragma once

#include <string>

#include "model_slot.h"

namespace server {

struct Readiness {
    int status;
    std::string text;  // the reply's body
};

inline Readiness readiness(const ServedModel *model, bool draining) {
    if (model == nullptr) return {503, "no model loaded\n"};
    if (model->device_failed()) return {503, "device failed: " + std::string(model->info.name) + "\n"};
    if (draining) return {503, "draining\n"};
    return {200, "ready: " + std::string(model->info.name) + "\n"};
}

}  // namespace server
