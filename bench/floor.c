// The phone-tap benchmark's floor (bench tooling, not the product): an HTTP/1.1 server on
// 127.0.0.1:PORT that answers every request at once with the same fixed verdict, on a kept
// connection, from one epoll thread, reading no more than each request's head and its
// Content-Length. It checks nothing and writes nothing: `TagFixBench phone-tap --floor` taps it
// with the same phones as tagfix serve, so its rows are what the machine, the kernel's TCP and the
// phones themselves cost before a server does any work.
//
//   cc -O2 -o .build/bench-floor bench/floor.c && .build/bench-floor PORT
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

struct connection {
    char bytes[16384];
    size_t length;
};

static struct connection *connections[65536];

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s PORT\n", argv[0]);
        return 2;
    }
    int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1]))};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(listener, (struct sockaddr *)&address, sizeof address) != 0 || listen(listener, 1024) != 0) {
        perror("bench-floor: bind/listen");
        return 1;
    }
    int poller = epoll_create1(0);
    struct epoll_event event = {.events = EPOLLIN, .data.fd = listener};
    epoll_ctl(poller, EPOLL_CTL_ADD, listener, &event);
    const char *body = "{\"verdict\":\"confirmed\",\"reason\":null,\"symbol\":\"✓\",\"words\":\"confirmed\",\"tag\":\"P0\","
                       "\"message\":\"confirmed: 3.2 m from P0 (radius 25 m, accuracy ±8 m)\",\"sun_counter\":1}\n";
    char answer[1024];
    int answerLength = snprintf(answer, sizeof answer,
                                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                                "Cache-Control: no-store\r\n\r\n%s",
                                strlen(body), body);
    struct epoll_event ready[256];
    for (;;) {
        int count = epoll_wait(poller, ready, 256, -1);
        for (int i = 0; i < count; i++) {
            int fd = ready[i].data.fd;
            if (fd == listener) {
                int client;
                while ((client = accept4(listener, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    if (client >= 65536) {
                        close(client);
                        continue;
                    }
                    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    connections[client] = calloc(1, sizeof(struct connection));
                    struct epoll_event watch = {.events = EPOLLIN, .data.fd = client};
                    epoll_ctl(poller, EPOLL_CTL_ADD, client, &watch);
                }
                continue;
            }
            struct connection *c = connections[fd];
            ssize_t got = recv(fd, c->bytes + c->length, sizeof c->bytes - c->length - 1, 0);
            if (got <= 0) {
                if (got < 0 && errno == EAGAIN) continue;
                close(fd);
                free(c);
                connections[fd] = NULL;
                continue;
            }
            c->length += (size_t)got;
            c->bytes[c->length] = 0;
            for (;;) {
                char *end = strstr(c->bytes, "\r\n\r\n");
                if (end == NULL) break;
                *end = 0;
                char *field = strcasestr(c->bytes, "\r\ncontent-length:");
                size_t bodyLength = field ? (size_t)atol(field + 17) : 0;
                *end = '\r';
                size_t total = (size_t)(end - c->bytes) + 4 + bodyLength;
                if (c->length < total) break;
                send(fd, answer, (size_t)answerLength, MSG_NOSIGNAL);
                memmove(c->bytes, c->bytes + total, c->length - total);
                c->length -= total;
                c->bytes[c->length] = 0;
            }
            if (c->length >= sizeof c->bytes - 1) {  // a head this server will not hold: not a phone's tap
                close(fd);
                free(c);
                connections[fd] = NULL;
            }
        }
    }
}
