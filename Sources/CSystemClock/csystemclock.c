#include "csystemclock.h"

#include <errno.h>
#include <string.h>
#include <sys/timex.h>

int csystemclock_synchronised(int64_t *maxerror_us) {
    struct timex t;
    memset(&t, 0, sizeof t);  // modes = 0: read only
    int state = ntp_adjtime(&t);
    if (state < 0) return -errno;
    *maxerror_us = (int64_t)t.maxerror;
    return (state != TIME_ERROR && (t.status & STA_UNSYNC) == 0) ? 1 : 0;
}
