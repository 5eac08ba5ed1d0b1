#ifndef CBENCHSCHED_H
#define CBENCHSCHED_H

/// Pins the thread `tid` (0: the calling thread) to the CPUs `first` through `last`, both
/// included: 0, or -errno. For the benchmarks only (the serve fan-out's threads harness keeps
/// its client threads off the server's CPU).
///
/// Why C: `sched_setaffinity` and the CPU_SET macros need _GNU_SOURCE, which Swift's Glibc module
/// does not define.
int cbenchsched_pin(int tid, int first, int last);

/// The calling thread's kernel id (`gettid`).
int cbenchsched_tid(void);

#endif
