#ifndef CPCSC_SHIM_H
#define CPCSC_SHIM_H

// pcsc-lite's client library (Debian libpcsclite-dev 1.9.9) for Swift. Only what Swift cannot use
// directly is wrapped; every helper says why it exists.
#include <winscard.h>
#include <string.h>

/// SCARD_PCI_T0 / SCARD_PCI_T1 / SCARD_PCI_RAW are macros taking the address of a global, which
/// Swift does not import: the protocol control information for the protocol a card was connected
/// with.
static inline const SCARD_IO_REQUEST *_Nonnull cpcsc_pci(DWORD protocol) {
    if (protocol == SCARD_PROTOCOL_T0) return &g_rgSCardT0Pci;
    if (protocol == SCARD_PROTOCOL_RAW) return &g_rgSCardRawPci;
    return &g_rgSCardT1Pci;
}

/// A reader state's ATR: rgbAtr is a fixed array Swift sees as a 33-element tuple. Copies at most
/// MAX_ATR_SIZE bytes into `out` and returns how many.
static inline size_t cpcsc_state_atr(const SCARD_READERSTATE *_Nonnull state, unsigned char *_Nonnull out) {
    size_t count = state->cbAtr > MAX_ATR_SIZE ? MAX_ATR_SIZE : state->cbAtr;
    memcpy(out, state->rgbAtr, count);
    return count;
}

#endif
