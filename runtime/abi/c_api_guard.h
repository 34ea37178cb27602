// c_api_guard.h — what every C ABI entry point shares: the one place where C++
// exceptions become a gpt_status plus a per-thread message, argument checks, and
// the string-output convention. Included by the c_api*.cpp files only.
#pragma once

#include <c10/util/Exception.h>

#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "gpt_runtime.h"

namespace gpt::c_api {

// Runs `body`, mapping every exception to a status. The message is logged and kept for gpt_runtime_last_error().
template <typename Body>
gpt_status guarded(const char *function, Body &&body) noexcept {
    gpt_status status = GPT_OK;
    std::string message;
    try {
        body();
        return GPT_OK;
    } catch (const gpt::Error &e) {
        status = e.status();
        message = e.what();
    } catch (const c10::OutOfMemoryError &e) {
        status = GPT_ERR_OUT_OF_MEMORY;
        message = std::string("out of device memory: ") + e.what_without_backtrace();
    } catch (const std::bad_alloc &) {
        status = GPT_ERR_OUT_OF_MEMORY;
        message = "out of host memory";
    } catch (const c10::AcceleratorError &e) {
        status = GPT_ERR_CUDA;
        message = std::string("CUDA error: ") + e.what_without_backtrace();
    } catch (const c10::Error &e) {
        status = GPT_ERR_INTERNAL;
        message = std::string("torch error: ") + e.what_without_backtrace();
    } catch (const std::exception &e) {
        status = GPT_ERR_INTERNAL;
        message = e.what();
    } catch (...) {
        status = GPT_ERR_INTERNAL;
        message = "unknown exception";
    }
    try {
        message = std::string(function) + ": " + message;
        gpt::set_last_error(message);
        gpt::log(GPT_LOG_DEBUG, message + " -> " + gpt::status_name(status));
    } catch (...) {  // logging must not turn a status into a crash
    }
    return status;
}

inline void require(bool condition, const char *what) {
    if (!condition) gpt::fail(GPT_ERR_INVALID_ARGUMENT, what);
}

// The buffer convention of the string outputs: `*out_size` = bytes needed incl. the NUL.
inline void copy_out(const std::string &s, char *out, size_t capacity, size_t *out_size) {
    *out_size = s.size() + 1;
    if (out == nullptr || s.size() + 1 > capacity)
        gpt::fail(GPT_ERR_BUFFER_TOO_SMALL,
                  "output needs " + std::to_string(s.size() + 1) + " bytes, capacity is " + std::to_string(capacity));
    std::memcpy(out, s.c_str(), s.size() + 1);
}

// A C array of `n` strings, each checked for NULL.
inline std::vector<std::string> string_list(const char *const *strings, int32_t n) {
    std::vector<std::string> list;
    for (int32_t i = 0; i < n; ++i) {
        if (strings[i] == nullptr) gpt::fail(GPT_ERR_INVALID_ARGUMENT, "string " + std::to_string(i) + " is NULL");
        list.emplace_back(strings[i]);
    }
    return list;
}

}  // namespace gpt::c_api
