#ifndef CPROCESS_H
#define CPROCESS_H

#include <sys/types.h>

/// Starts `path` with `argv` and `envp` (NULL-terminated), its standard input, output and error
/// duplicated from the given descriptors (-1: /dev/null), every other descriptor closed, and, in
/// the child, an empty signal mask and every signal at its default disposition: nothing of the
/// spawning thread's mask (a dispatch or cooperative thread blocks almost every signal) or of the
/// process's ignored signals reaches the program, so SIGTERM stops it. Writes the child's pid to
/// `pid`; returns 0, or an errno value.
///
/// Why C: posix_spawn_file_actions_addclosefrom_np is declared only under _GNU_SOURCE.
int cprocess_spawn(pid_t *_Nonnull pid, const char *_Nonnull path, char *_Nullable const *_Nonnull argv,
                   char *_Nullable const *_Nonnull envp, int stdin_fd, int stdout_fd, int stderr_fd);

/// A pidfd for `pid` (pidfd_open(2), Linux 5.3): readable once the process has exited, so its exit
/// can be awaited with poll instead of polling waitpid. Close-on-exec. Returns the descriptor, or
/// -errno.
///
/// Why C: glibc declares pidfd_open only in <sys/pidfd.h>, which Swift's Glibc module does not import.
int cprocess_pidfd_open(pid_t pid);

/// A pipe with O_CLOEXEC on both ends (and O_NONBLOCK when `nonblocking` is not 0), set atomically
/// by `pipe2`, which is declared only under _GNU_SOURCE. Returns 0, or an errno value.
int cprocess_pipe(int fds[_Nonnull 2], int nonblocking);

/// Catches `signals` with a handler that writes each signal's number, as one byte, to `fd` (a
/// non-blocking pipe's write end): the self-pipe. The handler does nothing else (write is
/// async-signal-safe). Several pipes may be installed at once (up to 256); a signal is written to
/// every pipe that wants it. The signals are unblocked in the calling thread. Returns the slot
/// (0 or more) to give to `cprocess_stop_signals_restore`, or -errno (-EBUSY when 16 are installed).
///
/// Why C: a signal handler may only make async-signal-safe calls, which Swift code cannot promise.
int cprocess_stop_signals_install(const int *_Nonnull signals, int count, int fd);

/// Stops writing to the slot's pipe; a signal no other slot wants gets back the disposition it
/// had before the first install. Returns only when no handler is writing, so the caller may then
/// close the pipe.
void cprocess_stop_signals_restore(int slot);

#endif
