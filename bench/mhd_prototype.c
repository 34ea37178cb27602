/* mhd_prototype.c — the transport candidate not taken (libmicrohttpd 0.9.75, Debian's), as a bare
 * server for bench/http_transport.py --prototype: GET /healthz answers "ok", POST /echo reads a body of
 * at most 64 KiB and answers its size. Its limits are set as gpt-server's would be: 1024 connections,
 * a 2 s timeout (libmicrohttpd's only one: inactivity, reset by every byte received), 32 KiB of
 * memory per connection for the head and buffers, two polling threads on epoll.
 *   cc -O2 bench/mhd_prototype.c -lmicrohttpd -o build/mhd_prototype && build/mhd_prototype PORT */
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct body {
    size_t size;
    int too_large;
};

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *text) {
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *data, size_t *size, void **state) {
    (void)cls, (void)version, (void)data;
    if (strcmp(method, "GET") == 0) return strcmp(url, "/healthz") == 0 ? reply(c, 200, "ok\n") : reply(c, 404, "{}");
    struct body *b = *state;
    if (b == NULL) { /* the head is in: the body follows in later calls */
        *state = calloc(1, sizeof *b);
        return *state ? MHD_YES : MHD_NO;
    }
    if (*size) {
        b->size += *size;
        b->too_large |= b->size > 65536;
        *size = 0;
        return MHD_YES;
    }
    char text[64];
    snprintf(text, sizeof text, "{\"bytes\": %zu}\n", b->size);
    return b->too_large ? reply(c, 413, "{}") : reply(c, 200, text);
}

static void done(void *cls, struct MHD_Connection *c, void **state, enum MHD_RequestTerminationCode why) {
    (void)cls, (void)c, (void)why;
    free(*state);
    *state = NULL;
}

int main(int argc, char **argv) {
    const unsigned short port = (unsigned short)(argc > 1 ? atoi(argv[1]) : 8090);
    struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, port, NULL, NULL, handle,
                                            NULL, MHD_OPTION_THREAD_POOL_SIZE, 2u, MHD_OPTION_CONNECTION_LIMIT, 1024u,
                                            MHD_OPTION_CONNECTION_TIMEOUT, 2u, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                                            (size_t)32768, MHD_OPTION_NOTIFY_COMPLETED, done, NULL, MHD_OPTION_END);
    if (d == NULL) return 1;
    printf("event=listening port=%u\n", port);
    fflush(stdout);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGINT);
    sigprocmask(SIG_BLOCK, &s, NULL);
    int sig;
    sigwait(&s, &sig);
    MHD_stop_daemon(d);
    return 0;
}
