// The loopback rule for addresses given as text (base/loopback.h): data-parallel training
// picks Gloo's interface by it.
#include <catch2/catch.hpp>

#include "base/loopback.h"

TEST_CASE("loopback addresses in every form a peer or a host setting takes", "[loopback]") {
    for (const char *address : {"localhost", "127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1", "0:0:0:0:0:0:0:1"})
        CHECK(gpt::is_loopback_address(address));
}

TEST_CASE("addresses of other interfaces and malformed ones are not loopback", "[loopback]") {
    for (const char *address : {"10.0.0.1", "128.0.0.1", "0.0.0.0", "::", "::ffff:10.0.0.1", "fe80::1", "127.foo",
                                "localhost.evil.example", "", " 127.0.0.1"})
        CHECK_FALSE(gpt::is_loopback_address(address));
}
