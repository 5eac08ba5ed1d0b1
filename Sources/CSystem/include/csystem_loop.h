#ifndef CSYSTEM_LOOP_H
#define CSYSTEM_LOOP_H

#include <stdbool.h>
#include <stdint.h>

// What IOLoop needs of epoll(7) and of its thread. Why C: <sys/epoll.h> is not part of Swift's
// Glibc module, `struct epoll_event` is packed on x86_64 (its 64-bit data sits at offset 4), and
// pthread_setname_np is declared only under _GNU_SOURCE. No epoll type crosses into Swift: a
// descriptor's interest goes in as two flags, a ready descriptor comes out as `csystem_epoll_ready`.
// Each call returns what the system call returns (-1 with errno set on failure).

/// One ready descriptor, as epoll_wait reported it: the token it was registered with and what
/// it is ready for (EPOLLIN, EPOLLOUT, EPOLLHUP, EPOLLERR).
typedef struct {
    uint64_t token;
    bool readable;
    bool writable;
    bool hangUp;
    bool error;
} csystem_epoll_ready;

/// epoll_create1(EPOLL_CLOEXEC).
int csystem_epoll_create(void);

/// epoll_ctl(EPOLL_CTL_ADD): `fd` watched, level-triggered, for reading and/or writing, and
/// reported with `token`.
int csystem_epoll_add(int epfd, int fd, bool readable, bool writable, uint64_t token);

/// epoll_ctl(EPOLL_CTL_MOD): `fd`'s interest and token replaced.
int csystem_epoll_modify(int epfd, int fd, bool readable, bool writable, uint64_t token);

/// epoll_ctl(EPOLL_CTL_DEL): `fd` no longer watched.
int csystem_epoll_remove(int epfd, int fd);

/// epoll_wait: up to `capacity` (at most 64) ready descriptors into `ready`, waiting at most
/// `timeout` milliseconds (-1: until one is ready). Returns how many.
int csystem_epoll_wait(int epfd, csystem_epoll_ready *_Nonnull ready, int capacity, int timeout);

/// pthread_setname_np on the calling thread: the first 15 bytes of `name` (the kernel's limit).
void csystem_name_thread(const char *_Nonnull name);

#endif
