#define _GNU_SOURCE
#include "csystem.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

int csystem_pipe2(int fds[2], int flags) { return pipe2(fds, flags); }

int csystem_dup3(int fd, int target, int flags) { return dup3(fd, target, flags); }

int csystem_accept4(int fd, int flags) { return accept4(fd, NULL, NULL, flags); }

int csystem_eventfd(unsigned int initial) { return eventfd(initial, EFD_NONBLOCK | EFD_CLOEXEC); }
