// launch.cpp — see launch.h.
#include "launch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace cli {

namespace {

// A port on 127.0.0.1 the kernel reports free; rank 0's store binds it right after.
int free_loopback_port() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    int port = 0;
    if (bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len) == 0)
        port = ntohs(addr.sin_port);
    close(fd);
    return port;
}

// argv without "--nproc N" / "--nproc=N".
std::vector<std::string> rank_arguments(int argc, char **argv) {
    std::vector<std::string> args;
    for (int i = 0; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--nproc") {
            ++i;
        } else if (a.rfind("--nproc=", 0) != 0) {
            args.push_back(a);
        }
    }
    return args;
}

// The parent's environment with the rendezvous variables replaced.
std::vector<std::string> rank_environment(int rank, int nproc, const std::string &addr, const std::string &port) {
    const std::vector<std::string> names = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"};
    std::vector<std::string> env;
    for (char **e = environ; *e != nullptr; ++e) {
        const std::string entry = *e;
        const std::string name = entry.substr(0, entry.find('='));
        bool replaced = false;
        for (const auto &n : names) replaced = replaced || n == name;
        if (!replaced) env.push_back(entry);
    }
    env.push_back("RANK=" + std::to_string(rank));
    env.push_back("LOCAL_RANK=" + std::to_string(rank));
    env.push_back("WORLD_SIZE=" + std::to_string(nproc));
    env.push_back("MASTER_ADDR=" + addr);
    env.push_back("MASTER_PORT=" + port);
    return env;
}

std::vector<char *> c_strings(std::vector<std::string> &strings) {
    std::vector<char *> out;
    out.reserve(strings.size() + 1);
    for (auto &s : strings) out.push_back(s.data());
    out.push_back(nullptr);
    return out;
}

volatile sig_atomic_t g_stop_signal = 0;

void record_stop_signal(int signal) { g_stop_signal = signal; }

// SIGINT/SIGTERM to the launcher stop the ranks instead of orphaning them. No
// SA_RESTART, so the signal interrupts waitpid.
void catch_stop_signals() {
    struct sigaction action {};
    action.sa_handler = record_stop_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
}

int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 1; }

std::string describe(int status) {
    return WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                             : std::string("killed by ") + strsignal(WTERMSIG(status));
}

// Stops the ranks still running: SIGTERM, then SIGKILL after `grace`; reaps them all.
void stop_ranks(std::vector<pid_t> &running, std::chrono::seconds grace) {
    for (pid_t pid : running) kill(pid, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + grace;
    while (!running.empty()) {
        running.erase(std::remove_if(running.begin(), running.end(),
                                     [](pid_t pid) { return waitpid(pid, nullptr, WNOHANG) == pid; }),
                      running.end());
        if (running.empty()) break;
        if (std::chrono::steady_clock::now() > deadline) {
            for (pid_t pid : running) kill(pid, SIGKILL);
            for (pid_t pid : running) waitpid(pid, nullptr, 0);
            running.clear();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
}

}  // namespace

int launch_local_ranks(int nproc, int argc, char **argv) {
    const char *addr_env = std::getenv("MASTER_ADDR");
    const char *port_env = std::getenv("MASTER_PORT");
    const std::string addr = addr_env ? addr_env : "127.0.0.1";
    const std::string port = port_env ? port_env : std::to_string(free_loopback_port());
    std::vector<std::string> args = rank_arguments(argc, argv);
    std::vector<char *> rank_argv = c_strings(args);
    catch_stop_signals();
    std::vector<pid_t> running, ranks;  // ranks[r] = pid of rank r
    for (int rank = 0; rank < nproc; ++rank) {
        std::vector<std::string> env = rank_environment(rank, nproc, addr, port);
        std::vector<char *> rank_env = c_strings(env);
        pid_t pid = 0;
        if (const int err = posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, rank_argv.data(), rank_env.data());
            err != 0) {
            std::fprintf(stderr, "gpt: cannot start rank %d: %s\n", rank, std::strerror(err));
            stop_ranks(running, std::chrono::seconds(10));
            return 1;
        }
        running.push_back(pid);
        ranks.push_back(pid);
    }
    int result = 0;
    while (!running.empty()) {
        if (g_stop_signal != 0) {
            std::fprintf(stderr, "gpt: %s; stopping %zu rank(s)\n", strsignal(g_stop_signal), running.size());
            stop_ranks(running, std::chrono::seconds(10));
            return 128 + g_stop_signal;
        }
        int status = 0;
        const pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0) {
            if (errno == EINTR) continue;
            break;
        }
        running.erase(std::remove(running.begin(), running.end(), pid), running.end());
        if (exit_code(status) != 0 && result == 0) {
            result = exit_code(status);
            const auto rank = std::find(ranks.begin(), ranks.end(), pid) - ranks.begin();
            std::fprintf(stderr, "gpt: rank %td failed (%s); stopping the other %zu\n", rank, describe(status).c_str(),
                         running.size());
            stop_ranks(running, std::chrono::seconds(10));
        }
    }
    return result;
}

}  // namespace cli
