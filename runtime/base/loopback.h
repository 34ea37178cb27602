// loopback.h — the rule for "this address names the local machine's loopback", for
// addresses given as text (MASTER_ADDR: data-parallel training picks Gloo's interface by it).
// gpt-server asks the socket instead (deploy/server/transport/peer.h).
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
