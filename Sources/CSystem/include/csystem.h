#ifndef CSYSTEM_H
#define CSYSTEM_H


// The Linux calls TagFixSystem makes that Swift's Glibc module does not import: they are declared
// only under _GNU_SOURCE (pipe2, dup3, accept4) or in a header it leaves out (<sys/eventfd.h>).
// Each returns what the call returns (-1 with errno set on failure).

/// pipe2(2) with `flags` (O_CLOEXEC, O_NONBLOCK). Why C: declared only under _GNU_SOURCE.
int csystem_pipe2(int fds[_Nonnull 2], int flags);

/// dup3(2) with `flags` (O_CLOEXEC). Why C: declared only under _GNU_SOURCE.
int csystem_dup3(int fd, int target, int flags);

/// The process's soft limit of open descriptors (getrlimit(2), RLIMIT_NOFILE) into `soft`
/// (RLIM_INFINITY as the largest value); 0, or -1 with errno.
int csystem_open_file_limit(unsigned long long *_Nonnull soft);

/// accept4(2) with `flags` (SOCK_CLOEXEC, SOCK_NONBLOCK), the peer's address not asked for.
/// Why C: declared only under _GNU_SOURCE.
int csystem_accept4(int fd, int flags);

/// eventfd(2), non-blocking and close-on-exec, its counter at `initial`. Why C: <sys/eventfd.h>
/// is not part of Swift's Glibc module.
int csystem_eventfd(unsigned int initial);

/// timerfd_create(2) on CLOCK_BOOTTIME (Swift's ContinuousClock), non-blocking and close-on-exec.
/// Why C: <sys/timerfd.h> is not part of Swift's Glibc module.
int csystem_timerfd(void);

/// timerfd_settime(2): one expiry `nanoseconds` from now (0 disarms it), no interval. Why C:
/// <sys/timerfd.h> is not part of Swift's Glibc module.
int csystem_timerfd_arm(int fd, long long nanoseconds);

#endif
