// collectives.cpp — ProcessGroup over c10d: a TCPStore hosted by rank 0 for the
// rendezvous, then ProcessGroupGloo (CPU) or ProcessGroupNCCL (CUDA builds).
// Every c10d or gloo failure surfaces here and becomes GPT_ERR_PEER_FAILED.
#include "train/collectives.h"

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef GPT_WITH_CUDA
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "base/loopback.h"

namespace gpt {

DistConfig validate_dist_params(const gpt_dist_params &p) {
    if (p.world_size < 1 || p.rank < 0 || p.rank >= p.world_size)
        fail(GPT_ERR_INVALID_ARGUMENT, "need world_size >= 1 and 0 <= rank < world_size, got world_size " +
                                           std::to_string(p.world_size) + ", rank " + std::to_string(p.rank));
    if (p.master_addr == nullptr || p.master_addr[0] == '\0')
        fail(GPT_ERR_INVALID_ARGUMENT, "master_addr must name rank 0's host");
    if (p.master_port < 1 || p.master_port > std::numeric_limits<uint16_t>::max())
        fail(GPT_ERR_INVALID_ARGUMENT, "master_port " + std::to_string(p.master_port) + " is outside [1, 65535]");
    if (p.timeout_ms < 1) fail(GPT_ERR_INVALID_ARGUMENT, "timeout_ms must be > 0");
    if (p.bucket_mb < 1) fail(GPT_ERR_INVALID_ARGUMENT, "bucket_mb must be > 0");
    DistConfig c;
    c.world_size = p.world_size;
    c.rank = p.rank;
    c.master_addr = p.master_addr;
    c.master_port = p.master_port;
    c.timeout_ms = p.timeout_ms;
    c.bucket_bytes = static_cast<int64_t>(p.bucket_mb) << 20;
    return c;
}

struct ProcessGroup::Backend {
    c10::intrusive_ptr<c10d::Store> store;
    c10::intrusive_ptr<c10d::Backend> group;
    std::vector<c10::intrusive_ptr<c10d::Work>> pending;
};

namespace {

// A socket listening on host:port only. Left to itself, the store's server would
// listen on every interface; given this descriptor, it serves where the ranks connect.
int listen_on(const std::string &host, int port) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *found = nullptr;
    if (const int err = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); err != 0)
        fail(GPT_ERR_INVALID_ARGUMENT, "master_addr '" + host + "': " + gai_strerror(err));
    int fd = -1, error = 0;
    for (const addrinfo *a = found; a != nullptr && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        const int on = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
        if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
            error = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(found);
    if (fd < 0)
        fail(GPT_ERR_INVALID_ARGUMENT, "rank 0 cannot listen on " + host + ":" + std::to_string(port) + " (" +
                                           std::strerror(error) + "): is MASTER_ADDR this host, MASTER_PORT free?");
    return fd;
}

}  // namespace

void use_nccl_error_handling() {
    static constexpr std::pair<const char *, const char *> kSettings[] = {
        {"TORCH_NCCL_BLOCKING_WAIT", "1"},
        {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "2"},
        {"TORCH_NCCL_ENABLE_MONITORING", "0"},
    };
    std::string used;
    for (const auto &[name, value] : kSettings) {
        if (std::getenv(name) == nullptr) setenv(name, value, /*overwrite=*/0);
        used += std::string(used.empty() ? "" : " ") + name + "=" + std::getenv(name);
    }
    log(GPT_LOG_DEBUG, "NCCL error handling: " + used);
}

namespace {

c10::intrusive_ptr<c10d::Backend> make_group(const c10::intrusive_ptr<c10d::Store> &store, const DistConfig &c,
                                             c10::Device device) {
    const std::chrono::milliseconds timeout(c.timeout_ms);
    if (device.is_cuda()) {
#ifdef GPT_WITH_CUDA
        use_nccl_error_handling();  // read by ProcessGroupNCCL's constructor
        auto options = c10d::ProcessGroupNCCL::Options::create();
        options->timeout = timeout;
        return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, c.rank, c.world_size, options);
#else
        fail(GPT_ERR_DEVICE_UNAVAILABLE,
             "distributed training of a CUDA model needs NCCL: rebuild the runtime where CMake finds the CUDA toolkit");
#endif
    }
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    // A job on one machine stays on the loopback interface; otherwise Gloo picks
    // the interface this host's name resolves to.
    options->devices.push_back(is_loopback_address(c.master_addr)
                                   ? c10d::ProcessGroupGloo::createDeviceForHostname(c.master_addr)
                                   : c10d::ProcessGroupGloo::createDefaultDevice());
    return c10::make_intrusive<c10d::ProcessGroupGloo>(store, c.rank, c.world_size, options);
}

}  // namespace

ProcessGroup::ProcessGroup(const DistConfig &config, c10::Device device)
    : config_(config), backend_(std::make_unique<Backend>()) {
    try {
        c10d::TCPStoreOptions options;
        options.port = static_cast<uint16_t>(config.master_port);
        options.isServer = config.rank == 0;
        options.numWorkers = static_cast<size_t>(config.world_size);
        options.waitWorkers = true;
        options.timeout = std::chrono::milliseconds(config.timeout_ms);
        if (options.isServer) options.masterListenFd = listen_on(config.master_addr, config.master_port);
        backend_->store = c10::make_intrusive<c10d::TCPStore>(config.master_addr, options);
        backend_->group = make_group(backend_->store, config, device);
    } catch (const Error &) {
        throw;
    } catch (const std::exception &e) {
        peer_failed("the rendezvous at " + config.master_addr + ":" + std::to_string(config.master_port), e.what());
    }
    log(GPT_LOG_INFO, "rank " + std::to_string(config.rank) + " of " + std::to_string(config.world_size) +
                          " joined at " + config.master_addr + ":" + std::to_string(config.master_port) + " (" +
                          backend_->group->getBackendName() + ")");
}

ProcessGroup::~ProcessGroup() = default;

void ProcessGroup::check_usable() const {
    if (broken_) fail(GPT_ERR_PEER_FAILED, "an earlier collective failed: free the trainer and restart the job");
}

void ProcessGroup::peer_failed(const std::string &during, const std::string &cause) {
    broken_ = true;
    if (backend_) backend_->pending.clear();
    // c10d messages carry a C++ backtrace after the first line; the first line is the cause.
    const std::string first_line = cause.substr(0, cause.find('\n'));
    fail(GPT_ERR_PEER_FAILED, "rank " + std::to_string(config_.rank) + " of " + std::to_string(config_.world_size) +
                                  ": " + during + " failed (timeout " + std::to_string(config_.timeout_ms) +
                                  " ms; a peer died, hung or never joined): " + first_line);
}

void ProcessGroup::start_sum(const at::Tensor &tensor) {
    check_usable();
    std::vector<at::Tensor> tensors{tensor};
    try {
        backend_->pending.push_back(backend_->group->allreduce(tensors));
    } catch (const std::exception &e) {
        peer_failed("an all-reduce", e.what());
    }
}

void ProcessGroup::start_broadcast(const at::Tensor &tensor, int root) {
    check_usable();
    std::vector<at::Tensor> tensors{tensor};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    try {
        backend_->pending.push_back(backend_->group->broadcast(tensors, options));
    } catch (const std::exception &e) {
        peer_failed("a broadcast", e.what());
    }
}

void ProcessGroup::wait_all() {
    check_usable();
    try {
        for (auto &work : backend_->pending) work->wait();
    } catch (const std::exception &e) {
        peer_failed("a collective", e.what());
    }
    backend_->pending.clear();
}

}  // namespace gpt
