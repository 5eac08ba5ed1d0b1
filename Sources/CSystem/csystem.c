#define _GNU_SOURCE
#include "csystem.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

int csystem_pipe2(int fds[2], int flags) { return pipe2(fds, flags); }

int csystem_dup3(int fd, int target, int flags) { return dup3(fd, target, flags); }

int csystem_open_file_limit(unsigned long long *soft) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
    *soft = limit.rlim_cur;
    return 0;
}

int csystem_accept4(int fd, int flags) { return accept4(fd, NULL, NULL, flags); }

int csystem_eventfd(unsigned int initial) { return eventfd(initial, EFD_NONBLOCK | EFD_CLOEXEC); }

int csystem_timerfd(void) { return timerfd_create(CLOCK_BOOTTIME, TFD_NONBLOCK | TFD_CLOEXEC); }

int csystem_timerfd_arm(int fd, long long nanoseconds) {
    struct itimerspec when = {{0, 0}, {nanoseconds / 1000000000, nanoseconds % 1000000000}};
    return timerfd_settime(fd, 0, &when, NULL);
}
