#define _GNU_SOURCE
#include "cpty.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

int cpty_open(char *path, size_t size) {
    int fd = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return -errno;
    if (grantpt(fd) != 0 || unlockpt(fd) != 0 || ptsname_r(fd, path, size) != 0) {
        int error = errno;
        close(fd);
        return -error;
    }
    return fd;
}

int cpty_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC) == 0 ? 0 : -errno; }
