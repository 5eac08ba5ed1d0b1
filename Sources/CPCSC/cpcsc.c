// CPCSC is a C target so that its include folder (the pcsc-lite forwarders) is on its clients'
// include path; the helpers are all inline in include/cpcsc.h.
#include "cpcsc.h"
