#ifndef CPTY_H
#define CPTY_H

#include <stddef.h>

/// Opens a pseudo-terminal pair: returns the controller descriptor (O_RDWR | O_NOCTTY |
/// O_CLOEXEC: no program the process spawns, gpsd included, holds an emulator's line open), granted
/// and unlocked, and writes the terminal side's path into `path`; or -errno on failure.
///
/// Why C: posix_openpt, grantpt, unlockpt and ptsname_r are declared only under _GNU_SOURCE /
/// _XOPEN_SOURCE, which Swift's Glibc module does not define, and the ioctl route (TIOCGPTN) is
/// variadic, which Swift cannot call.
int cpty_open(char *_Nonnull path, size_t size);

/// A pipe with O_CLOEXEC on both ends, set atomically: `pipe2`, which is declared only under
/// _GNU_SOURCE. (`pipe` and then `fcntl` leaves a moment in which a process spawned by another
/// thread inherits the ends.) Returns 0, or -errno.
int cpty_pipe_cloexec(int fds[_Nonnull 2]);

#endif
