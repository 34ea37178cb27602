// log.h — the library's logger: stderr at the GPT_LOG level, or a user callback.
// The interface is plain strings so spdlog (and its fmt) stays inside log.cpp,
// apart from torch's bundled fmt.
#pragma once

#include <string>

#include "gpt_runtime.h"

namespace gpt {

bool log_enabled(gpt_log_level level);
void log(gpt_log_level level, const std::string &message);
void set_log_callback(gpt_log_callback callback, void *user_data);

}  // namespace gpt
