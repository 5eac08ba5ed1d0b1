#define _GNU_SOURCE
#include "csystem_loop.h"

#include <pthread.h>
#include <string.h>
#include <sys/epoll.h>

static int control(int epfd, int op, int fd, bool readable, bool writable, uint64_t token) {
    struct epoll_event event;
    memset(&event, 0, sizeof event);
    event.events = (readable ? EPOLLIN : 0u) | (writable ? EPOLLOUT : 0u);
    event.data.u64 = token;
    return epoll_ctl(epfd, op, fd, &event);
}

int csystem_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int csystem_epoll_add(int epfd, int fd, bool readable, bool writable, uint64_t token) {
    return control(epfd, EPOLL_CTL_ADD, fd, readable, writable, token);
}

int csystem_epoll_modify(int epfd, int fd, bool readable, bool writable, uint64_t token) {
    return control(epfd, EPOLL_CTL_MOD, fd, readable, writable, token);
}

int csystem_epoll_remove(int epfd, int fd) { return epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL); }

int csystem_epoll_wait(int epfd, csystem_epoll_ready *ready, int capacity, int timeout) {
    struct epoll_event events[64];
    if (capacity > 64) capacity = 64;
    int count = epoll_wait(epfd, events, capacity, timeout);
    for (int i = 0; i < count; i++) {
        ready[i].token = events[i].data.u64;
        ready[i].readable = (events[i].events & EPOLLIN) != 0;
        ready[i].writable = (events[i].events & EPOLLOUT) != 0;
        ready[i].hangUp = (events[i].events & EPOLLHUP) != 0;
        ready[i].error = (events[i].events & EPOLLERR) != 0;
    }
    return count;
}

void csystem_name_thread(const char *name) {
    char shortened[16];
    strncpy(shortened, name, sizeof shortened - 1);
    shortened[sizeof shortened - 1] = '\0';
    pthread_setname_np(pthread_self(), shortened);
}
