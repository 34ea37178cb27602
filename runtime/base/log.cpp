// log.cpp — spdlog set-up. The library never writes to stdout: that belongs to the app.
#include "base/log.h"

#include <spdlog/details/null_mutex.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

namespace gpt {

namespace {

gpt_log_level to_gpt_level(spdlog::level::level_enum level) {
    switch (level) {
        case spdlog::level::trace: return GPT_LOG_TRACE;
        case spdlog::level::debug: return GPT_LOG_DEBUG;
        case spdlog::level::info: return GPT_LOG_INFO;
        case spdlog::level::warn: return GPT_LOG_WARN;
        default: return GPT_LOG_ERROR;
    }
}

// Serialised by LoggerSlot::mutex, hence no mutex of its own.
class CallbackSink : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
public:
    CallbackSink(gpt_log_callback callback, void *user_data) : callback_(callback), user_data_(user_data) {}

protected:
    void sink_it_(const spdlog::details::log_msg &msg) override {
        std::string text(msg.payload.data(), msg.payload.size());
        callback_(to_gpt_level(msg.level), text.c_str(), user_data_);
    }
    void flush_() override {}

private:
    gpt_log_callback callback_;
    void *user_data_;
};

spdlog::level::level_enum level_from_env() {
    const char *value = std::getenv("GPT_LOG");
    if (value == nullptr || *value == '\0') return spdlog::level::warn;
    return spdlog::level::from_str(value);  // unknown names mean "off"
}

std::shared_ptr<spdlog::logger> make_logger(spdlog::sink_ptr sink) {
    auto logger = std::make_shared<spdlog::logger>("gpt_runtime", std::move(sink));
    logger->set_level(level_from_env());
    logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [gpt_runtime] [%l] %v");
    return logger;
}

// The logger in use. `mutex` is held while a line is written, through the callback too, and while the logger is
// swapped: a line goes whole to one sink, and once set_log_callback returns no thread is still in the old
// callback, whose user_data the caller may then free. Logging is rare (warn by default) and every sink
// serialised its lines already, so one lock costs nothing new.
struct LoggerSlot {
    std::mutex mutex;
    std::shared_ptr<spdlog::logger> logger = make_logger(std::make_shared<spdlog::sinks::stderr_color_sink_st>());
    // Read without the lock by log_enabled, which callers ask before they build a line.
    std::atomic<int> level{logger->level()};
};

LoggerSlot &logger_slot() {
    static LoggerSlot slot;
    return slot;
}

spdlog::level::level_enum to_spdlog_level(gpt_log_level level) {
    switch (level) {
        case GPT_LOG_TRACE: return spdlog::level::trace;
        case GPT_LOG_DEBUG: return spdlog::level::debug;
        case GPT_LOG_INFO: return spdlog::level::info;
        case GPT_LOG_WARN: return spdlog::level::warn;
        default: return spdlog::level::err;
    }
}

}  // namespace

bool log_enabled(gpt_log_level level) {
    return to_spdlog_level(level) >= logger_slot().level.load(std::memory_order_relaxed);
}

void log(gpt_log_level level, const std::string &message) {
    if (!log_enabled(level)) return;  // most lines: no lock taken
    LoggerSlot &slot = logger_slot();
    const std::lock_guard<std::mutex> lock(slot.mutex);
    slot.logger->log(to_spdlog_level(level), message);
}

void set_log_callback(gpt_log_callback callback, void *user_data) {
    spdlog::sink_ptr sink;
    if (callback != nullptr) {
        sink = std::make_shared<CallbackSink>(callback, user_data);
    } else {
        sink = std::make_shared<spdlog::sinks::stderr_color_sink_st>();
    }
    std::shared_ptr<spdlog::logger> logger = make_logger(std::move(sink));
    LoggerSlot &slot = logger_slot();
    const std::lock_guard<std::mutex> lock(slot.mutex);
    slot.level.store(logger->level(), std::memory_order_relaxed);
    slot.logger.swap(logger);  // the old one is destroyed after the lock is released
}

}  // namespace gpt
