// loopback.h — the one rule for "this address is the local machine's loopback",
// used by data-parallel training (Gloo's interface) and by gpt-server (admin
// endpoints). Header-only and torch-free: the server links only the C API and
// includes this file from the source tree.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>

#include <string>

namespace gpt {

// "localhost", any 127.0.0.0/8 address, ::1, and IPv4-mapped 127.x (::ffff:127.0.0.1).
inline bool is_loopback_address(const std::string &address) {
    if (address == "localhost") return true;
    in_addr v4{};
    if (::inet_pton(AF_INET, address.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
    in6_addr v6{};
    if (::inet_pton(AF_INET6, address.c_str(), &v6) != 1) return false;
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
}

}  // namespace gpt
