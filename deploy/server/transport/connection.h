// connection.h — one client connection on Boost.Beast: reads each request within
// the listener's limits (limits.h), hands it to its route (router.h), writes the
// response or stream, and keeps the connection for the next request or closes it.
// Nothing here blocks a thread: a slow or idle client costs a socket and a timer,
// never a worker.
#pragma once

#include <boost/asio/ip/tcp.hpp>

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "http_message.h"
#include "idle_set.h"
#include "limits.h"
#include "router.h"
#include "worker_pool.h"

namespace server::http {

// Writes the body of a response the transport makes itself (400, 404, 408, 413, 415, 431, 500) for a
// request to `path` ("" before the path is known); the API layer gives it its error shape and counts it.
using ErrorBody = std::function<void(Response &res, int status, const std::string &message, const std::string &path)>;

// What every connection of one listener shares.
struct ListenerState {
    Limits limits;
    Router router;
    ErrorBody error_body;
    WorkerPool *workers = nullptr;  // the listener's; alive while any connection is
    std::atomic<size_t> connections{0};
    IdleSet idle;  // of them, those waiting for their next request
};

// Serves requests on `socket` (whose executor is a strand) until the client leaves, a limit closes the
// connection, or the listener's I/O stops.
void serve_connection(boost::asio::ip::tcp::socket socket, const std::shared_ptr<ListenerState> &state);

}  // namespace server::http
