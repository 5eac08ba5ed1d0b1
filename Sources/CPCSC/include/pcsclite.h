// Forwards to pcsc-lite's header. <PCSC/winscard.h> includes <pcsclite.h> and <wintypes.h> by
// bare name, which pkg-config's -I/usr/include/PCSC would find; pkg-config hands that flag over
// with -pthread, which SwiftPM refuses with a warning. This folder is on every client's include
// path (CPCSC is a C target), so these two forwarders stand in for the flag.
#include <PCSC/pcsclite.h>
