// error.h — the runtime's one error type and the per-thread last-error message.
// Internals throw gpt::Error; the C API's guard (abi/c_api_guard.h) turns it into a status.
#pragma once

#include <stdexcept>
#include <string>

#include "gpt_runtime.h"

namespace gpt {

class Error : public std::runtime_error {
public:
    Error(gpt_status status, const std::string &message) : std::runtime_error(message), status_(status) {}
    gpt_status status() const noexcept { return status_; }

private:
    gpt_status status_;
};

[[noreturn]] inline void fail(gpt_status status, const std::string &message) { throw Error(status, message); }

void set_last_error(const std::string &message);
const char *last_error() noexcept;
// "GPT_ERR_ARTIFACT_HASH" for GPT_ERR_ARTIFACT_HASH (gpt_status_to_string).
const char *status_name(gpt_status status) noexcept;

}  // namespace gpt
