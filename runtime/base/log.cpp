// log.cpp — spdlog set-up. The library never writes to stdout: that belongs to the app.
#include "base/log.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

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

class CallbackSink : public spdlog::sinks::base_sink<std::mutex> {
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

std::shared_ptr<spdlog::logger> &logger_slot() {
    static std::shared_ptr<spdlog::logger> logger =
        make_logger(std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    return logger;
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

bool log_enabled(gpt_log_level level) { return logger_slot()->should_log(to_spdlog_level(level)); }

void log(gpt_log_level level, const std::string &message) { logger_slot()->log(to_spdlog_level(level), message); }

void set_log_callback(gpt_log_callback callback, void *user_data) {
    spdlog::sink_ptr sink;
    if (callback != nullptr) {
        sink = std::make_shared<CallbackSink>(callback, user_data);
    } else {
        sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    }
    logger_slot() = make_logger(std::move(sink));
}

}  // namespace gpt
