#define _GNU_SOURCE
#include "cprocess.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

int cprocess_spawn(pid_t *pid, const char *path, char *const *argv, char *const *envp, int stdin_fd, int stdout_fd,
                   int stderr_fd) {
    posix_spawnattr_t attributes;
    posix_spawn_file_actions_t actions;
    int error = posix_spawnattr_init(&attributes);
    if (error != 0) return error;
    error = posix_spawn_file_actions_init(&actions);
    if (error != 0) {
        posix_spawnattr_destroy(&attributes);
        return error;
    }
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    if (error == 0) error = posix_spawnattr_setsigmask(&attributes, &none);
    if (error == 0) error = posix_spawnattr_setsigdefault(&attributes, &all);
    if (error == 0) error = posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    const int fds[3] = {stdin_fd, stdout_fd, stderr_fd};
    for (int target = 0; target < 3 && error == 0; target++) {
        if (fds[target] < 0) {
            error = posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0);
        } else {
            error = posix_spawn_file_actions_adddup2(&actions, fds[target], target);
        }
    }
    if (error == 0) error = posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    if (error == 0) error = posix_spawn(pid, path, &actions, &attributes, argv, envp);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    return error;
}

int cprocess_pipe(int fds[2], int nonblocking) {
    return pipe2(fds, O_CLOEXEC | (nonblocking ? O_NONBLOCK : 0)) == 0 ? 0 : errno;
}

#define CPROCESS_MAX_SIGNALS 8

static atomic_int stop_pipe = -1;
static int caught[CPROCESS_MAX_SIGNALS];
static struct sigaction earlier[CPROCESS_MAX_SIGNALS];
static int caught_count = 0;

static void stop_signal_handler(int signal) {
    int saved = errno;
    unsigned char byte = (unsigned char)signal;
    int fd = atomic_load(&stop_pipe);
    if (fd >= 0) (void)!write(fd, &byte, 1);
    errno = saved;
}

int cprocess_stop_signals_install(const int *signals, int count, int fd) {
    if (count < 0 || count > CPROCESS_MAX_SIGNALS) return EINVAL;
    if (caught_count > 0) return EBUSY;
    atomic_store(&stop_pipe, fd);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = stop_signal_handler;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigset_t set;
    sigemptyset(&set);
    for (int index = 0; index < count; index++) {
        if (sigaction(signals[index], &action, &earlier[caught_count]) != 0) {
            int error = errno;
            cprocess_stop_signals_restore();
            return error;
        }
        caught[caught_count++] = signals[index];
        sigaddset(&set, signals[index]);
    }
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    return 0;
}

void cprocess_stop_signals_restore(void) {
    for (int index = caught_count - 1; index >= 0; index--) sigaction(caught[index], &earlier[index], NULL);
    caught_count = 0;
    atomic_store(&stop_pipe, -1);
}
