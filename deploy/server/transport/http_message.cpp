// http_message.cpp — see http_message.h.
#include "http_message.h"

#include <strings.h>

namespace server::http {

std::string Request::header(std::string_view name) const {
    for (const auto &[key, value] : headers)
        if (key.size() == name.size() && strncasecmp(key.data(), name.data(), name.size()) == 0) return value;
    return "";
}

}  // namespace server::http
