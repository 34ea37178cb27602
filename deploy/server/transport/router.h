// router.h — which handler answers a method and path, and on which thread: quick
// routes (probes, metrics, tokenize) run on the transport's I/O threads, routes that
// wait (generations, which block until their last token; model reloads) on its
// worker pool, so that they never stall the reading of other connections.
#pragma once

#include <string>
#include <vector>

#include "http_message.h"

namespace server::http {

enum class RunsOn { io_thread, worker };

struct Route {
    std::string method;
    std::string path;
    RunsOn runs_on;
    Handler handler;
};

class Router {
public:
    void add(std::string method, std::string path, RunsOn runs_on, Handler handler);
    // The route for this method and exact path; null when there is none.
    const Route *find(const std::string &method, const std::string &path) const;

private:
    std::vector<Route> routes_;  // a handful: a linear search is the quickest
};

}  // namespace server::http
