// idle_connections.cpp — see idle_connections.h.
#include "idle_connections.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <stdexcept>
#include <utility>
#include <vector>

namespace server {

namespace {

// How late a deadline may be noticed: the wait never sleeps longer than this.
constexpr int kTickMs = 200;

int checked(int fd, const char *what) {
    if (fd < 0) throw std::runtime_error(std::string("idle connections: ") + what + " failed");
    return fd;
}

}  // namespace

IdleConnections::IdleConnections(size_t max_idle, std::function<void(Connection)> resume)
    : max_idle_(max_idle),
      resume_(std::move(resume)),
      epoll_(checked(::epoll_create1(EPOLL_CLOEXEC), "epoll_create1")),
      wake_(checked(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), "eventfd")) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = wake_;
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &event);
    thread_ = std::thread([this] { run(); });
}

IdleConnections::~IdleConnections() {
    stop();
    ::close(wake_);
    ::close(epoll_);
}

void IdleConnections::wait_for_request(Connection connection, Clock::time_point deadline) {
    add(std::move(connection), deadline, false);
}

void IdleConnections::linger(Connection connection, Clock::time_point deadline) {
    ::shutdown(connection->socket(), SHUT_WR);  // the reply is complete: the client sees its end
    add(std::move(connection), deadline, true);
}

void IdleConnections::add(Connection connection, Clock::time_point deadline, bool lingering) {
    Connection evicted;  // closed outside the lock
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_) return;
    if (entries_.size() >= max_idle_) {
        auto oldest = entries_.begin();
        for (auto it = entries_.begin(); it != entries_.end(); ++it)
            if (it->second.deadline < oldest->second.deadline) oldest = it;
        evicted = oldest->second.connection;
        forget(oldest->first);
    }
    const int fd = connection->socket();
    epoll_event event{};
    event.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
    event.data.fd = fd;
    if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &event) != 0) return;  // dropped: closed
    entries_[fd] = Entry{std::move(connection), deadline, lingering};
}

void IdleConnections::forget(int fd) {
    ::epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
    entries_.erase(fd);
}

void IdleConnections::stop() {
    std::unordered_map<int, Entry> closing;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stopped_) return;
        stopped_ = true;
        for (const auto &entry : entries_) ::epoll_ctl(epoll_, EPOLL_CTL_DEL, entry.first, nullptr);
        closing.swap(entries_);
    }
    const uint64_t one = 1;
    if (::write(wake_, &one, sizeof one) < 0) {
        // The counter cannot overflow from one write; the thread also wakes every tick.
    }
    if (thread_.joinable()) thread_.join();
}

size_t IdleConnections::size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_.size();
}

void IdleConnections::run() {
    std::array<epoll_event, 64> events{};
    while (true) {
        const int n = ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), kTickMs);
        std::vector<Connection> resumed, closed;  // acted on outside the lock
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (stopped_) return;
            for (int i = 0; i < n; ++i) {
                const int fd = events[static_cast<size_t>(i)].data.fd;
                const auto it = entries_.find(fd);
                if (it == entries_.end()) continue;  // the wake-up eventfd, or evicted meanwhile
                Entry &entry = it->second;
                if (!entry.lingering) {
                    resumed.push_back(std::move(entry.connection));
                    forget(fd);
                } else if (entry.connection->discard_input()) {
                    epoll_event again{};
                    again.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
                    again.data.fd = fd;
                    ::epoll_ctl(epoll_, EPOLL_CTL_MOD, fd, &again);
                } else {
                    closed.push_back(std::move(entry.connection));
                    forget(fd);
                }
            }
            const Clock::time_point now = Clock::now();
            for (auto it = entries_.begin(); it != entries_.end();) {
                if (it->second.deadline > now) {
                    ++it;
                    continue;
                }
                ::epoll_ctl(epoll_, EPOLL_CTL_DEL, it->first, nullptr);
                closed.push_back(std::move(it->second.connection));
                it = entries_.erase(it);
            }
        }
        for (Connection &c : resumed) resume_(std::move(c));
    }
}

}  // namespace server
