#ifndef CSYSTEMCLOCK_H
#define CSYSTEMCLOCK_H

#include <stdint.h>

/// Whether the kernel says the system clock is synchronised (by NTP, chrony, or gpsd through
/// chrony): 1 synchronised, 0 not (STA_UNSYNC set, or ntp_adjtime returns TIME_ERROR), -errno
/// when the kernel cannot be asked. `maxerror_us` receives the kernel's maximum error estimate.
///
/// Why C: `ntp_adjtime` and `struct timex` live in <sys/timex.h>, which Swift's Glibc module does
/// not import.
int csystemclock_synchronised(int64_t *_Nonnull maxerror_us);

#endif
