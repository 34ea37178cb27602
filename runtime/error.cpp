// error.cpp — per-thread storage of the last error message.
#include "error.h"

namespace gpt {

namespace {
thread_local std::string t_last_error;
}

void set_last_error(const std::string &message) { t_last_error = message; }

const char *last_error() noexcept { return t_last_error.c_str(); }

}  // namespace gpt
