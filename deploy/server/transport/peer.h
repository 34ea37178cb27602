// peer.h — what the transport knows of a connection's other end.
#pragma once

#include <boost/asio/ip/address.hpp>

namespace server::http {

// Whether a peer connected from this machine's loopback: 127.0.0.0/8, ::1, or an IPv4-mapped 127.x
// (::ffff:127.0.0.1, which a dual-stack listener reports for an IPv4 client). Read from the socket's
// address, never from a header.
inline bool is_loopback_peer(const boost::asio::ip::address &address) {
    if (address.is_loopback()) return true;
    if (!address.is_v6() || !address.to_v6().is_v4_mapped()) return false;
    return boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, address.to_v6()).is_loopback();
}

}  // namespace server::http
