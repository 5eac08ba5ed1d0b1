// A slow disk for tests (test tooling, never the product): loaded with LD_PRELOAD, it makes
// fsync and fdatasync wait SLOW_FSYNC_MS milliseconds (10 by default) before they do their work,
// except on a RAM file system (tmpfs), whose fsync costs nothing on a real machine either. A
// virtual machine's disk with a write-through cache, or a busy one, takes that long; the
// machines tests run on mostly do not, and a test that holds there only because fsync is cheap
// fails on the next one. Used by FleetBrokerTests's restart under a slow disk.
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "slowfsync.h"

#define TAGFIX_TMPFS_MAGIC 0x01021994

/// Waits before the flush unless `fd` is on a RAM file system; errno is left as it was.
static void tagfix_slow_fsync_wait(int fd) {
    int saved = errno;
    struct statfs info;
    const char *text = getenv("SLOW_FSYNC_MS");
    long milliseconds = text ? atol(text) : 10;
    if (milliseconds > 0 && !(fstatfs(fd, &info) == 0 && info.f_type == TAGFIX_TMPFS_MAGIC)) {
        struct timespec wait = {milliseconds / 1000, (milliseconds % 1000) * 1000000L};
        while (nanosleep(&wait, &wait) != 0 && errno == EINTR) {}
    }
    errno = saved;
}

int fsync(int fd) {
    tagfix_slow_fsync_wait(fd);
    return (int)syscall(SYS_fsync, fd);
}

int fdatasync(int fd) {
    tagfix_slow_fsync_wait(fd);
    return (int)syscall(SYS_fdatasync, fd);
}
