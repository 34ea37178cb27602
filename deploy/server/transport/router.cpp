// router.cpp — see router.h.
#include "router.h"

#include <utility>

namespace server::http {

void Router::add(std::string method, std::string path, RunsOn runs_on, Handler handler) {
    routes_.push_back({std::move(method), std::move(path), runs_on, std::move(handler)});
}

const Route *Router::find(const std::string &method, const std::string &path) const {
    for (const Route &route : routes_)
        if (route.method == method && route.path == path) return &route;
    return nullptr;
}

}  // namespace server::http
