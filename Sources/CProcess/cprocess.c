#define _GNU_SOURCE
#include "cprocess.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <sched.h>
#include <string.h>
#include <sys/pidfd.h>
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

int cprocess_pidfd_open(pid_t pid) {
    int fd = pidfd_open(pid, 0);
    return fd >= 0 ? fd : -errno;
}

int cprocess_pipe(int fds[2], int nonblocking) {
    return pipe2(fds, O_CLOEXEC | (nonblocking ? O_NONBLOCK : 0)) == 0 ? 0 : errno;
}

// Up to CPROCESS_SLOTS pipes at once (several commands may run in one process, as the tests run
// them), each with the signals it wants. A signal is caught while any slot wants it; its earlier
// disposition comes back when none does. Install and restore are serialised by `lock`; the
// handler reads the slots with atomics only, and `restore` waits until no handler is running
// before it returns, so the caller may close the pipe at once.
#define CPROCESS_SLOTS 256

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int slot_fd[CPROCESS_SLOTS] = {[0 ... CPROCESS_SLOTS - 1] = -1};
static atomic_ullong slot_signals[CPROCESS_SLOTS];
static atomic_int handlers_running = 0;
static int wanted_by[64];
static struct sigaction earlier[64];

static void stop_signal_handler(int signal) {
    int saved = errno;
    atomic_fetch_add(&handlers_running, 1);
    unsigned char byte = (unsigned char)signal;
    for (int slot = 0; slot < CPROCESS_SLOTS; slot++) {
        int fd = atomic_load(&slot_fd[slot]);
        if (fd >= 0 && (atomic_load(&slot_signals[slot]) & (1ULL << signal))) (void)!write(fd, &byte, 1);
    }
    atomic_fetch_sub(&handlers_running, 1);
    errno = saved;
}

static void release(int slot) {
    unsigned long long signals = atomic_load(&slot_signals[slot]);
    atomic_store(&slot_fd[slot], -1);
    atomic_store(&slot_signals[slot], 0);
    for (int signal = 1; signal < 64; signal++) {
        if ((signals & (1ULL << signal)) && --wanted_by[signal] == 0) sigaction(signal, &earlier[signal], NULL);
    }
    while (atomic_load(&handlers_running) != 0) sched_yield();
}

int cprocess_stop_signals_install(const int *signals, int count, int fd) {
    if (count < 0) return -EINVAL;
    for (int index = 0; index < count; index++) {
        if (signals[index] < 1 || signals[index] > 63) return -EINVAL;
    }
    pthread_mutex_lock(&lock);
    int slot = 0;
    while (slot < CPROCESS_SLOTS && atomic_load(&slot_fd[slot]) >= 0) slot++;
    if (slot == CPROCESS_SLOTS) {
        pthread_mutex_unlock(&lock);
        return -EBUSY;
    }
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = stop_signal_handler;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigset_t set;
    sigemptyset(&set);
    atomic_store(&slot_signals[slot], 0);
    atomic_store(&slot_fd[slot], fd);
    for (int index = 0; index < count; index++) {
        int signal = signals[index];
        if (atomic_load(&slot_signals[slot]) & (1ULL << signal)) continue;
        if (wanted_by[signal] == 0 && sigaction(signal, &action, &earlier[signal]) != 0) {
            int error = errno;
            release(slot);
            pthread_mutex_unlock(&lock);
            return -error;
        }
        wanted_by[signal]++;
        atomic_fetch_or(&slot_signals[slot], 1ULL << signal);
        sigaddset(&set, signal);
    }
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    pthread_mutex_unlock(&lock);
    return slot;
}

void cprocess_stop_signals_restore(int slot) {
    if (slot < 0 || slot >= CPROCESS_SLOTS) return;
    pthread_mutex_lock(&lock);
    if (atomic_load(&slot_fd[slot]) >= 0) release(slot);
    pthread_mutex_unlock(&lock);
}
