// gpt-server admits its admin endpoints from this machine only, by the socket's peer address
// (deploy/server/transport/peer.h): every form a loopback client's address takes, and none other.
#include <boost/asio/ip/address.hpp>
#include <catch2/catch.hpp>

#include "transport/peer.h"

TEST_CASE("a peer on the loopback, in every form a listener reports it, is local", "[server][peer]") {
    for (const char *address : {"127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1", "0:0:0:0:0:0:0:1"})
        CHECK(server::http::is_loopback_peer(boost::asio::ip::make_address(address)));
}

TEST_CASE("peers on other interfaces are not local", "[server][peer]") {
    for (const char *address : {"10.0.0.1", "128.0.0.1", "0.0.0.0", "::", "::ffff:10.0.0.1", "fe80::1", "::127.0.0.1"})
        CHECK_FALSE(server::http::is_loopback_peer(boost::asio::ip::make_address(address)));
}
