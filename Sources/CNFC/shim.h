#ifndef CNFC_SHIM_H
#define CNFC_SHIM_H

// libnfc (Debian libnfc-dev 1.8.0) for Swift. Only what Swift cannot use directly is wrapped;
// every helper says why it exists.
#include <nfc/nfc.h>
#include <string.h>

/// nfc_list_devices fills an array of nfc_connstring (char[1024] each), which Swift imports as
/// tuples; this copies up to `max` of them into one flat buffer of `max * NFC_BUFSIZE_CONNSTRING`
/// bytes and returns how many were found.
static inline size_t cnfc_list_devices(nfc_context *_Nonnull context, char *_Nonnull buffer, size_t max) {
    nfc_connstring found[16];
    if (max > 16) max = 16;
    size_t count = nfc_list_devices(context, found, max);
    for (size_t i = 0; i < count; i++) {
        memcpy(buffer + i * NFC_BUFSIZE_CONNSTRING, found[i], NFC_BUFSIZE_CONNSTRING);
        buffer[i * NFC_BUFSIZE_CONNSTRING + NFC_BUFSIZE_CONNSTRING - 1] = 0;
    }
    return count;
}

/// The ISO14443A fields of a target: nfc_target_info is a union whose members Swift sees as
/// overlapping tuple-typed properties. Copies ATQA (2), SAK, UID (up to 10) and ATS (up to 254).
static inline void cnfc_target_iso14443a(const nfc_target *_Nonnull target, uint8_t *_Nonnull atqa, uint8_t *_Nonnull sak,
                                         uint8_t *_Nonnull uid, size_t *_Nonnull uid_length,
                                         uint8_t *_Nonnull ats, size_t *_Nonnull ats_length) {
    const nfc_iso14443a_info *info = &target->nti.nai;
    memcpy(atqa, info->abtAtqa, 2);
    *sak = info->btSak;
    *uid_length = info->szUidLen > 10 ? 10 : info->szUidLen;
    memcpy(uid, info->abtUid, *uid_length);
    *ats_length = info->szAtsLen > 254 ? 254 : info->szAtsLen;
    memcpy(ats, info->abtAts, *ats_length);
}

/// The FeliCa fields of a target (the nfc_felica_info member of the nfc_target_info union):
/// IDm (8), PMm (8) and the system code (2).
static inline void cnfc_target_felica(const nfc_target *_Nonnull target, uint8_t *_Nonnull idm, uint8_t *_Nonnull pmm,
                                      uint8_t *_Nonnull system_code) {
    const nfc_felica_info *info = &target->nti.nfi;
    memcpy(idm, info->abtId, 8);
    memcpy(pmm, info->abtPad, 8);
    memcpy(system_code, info->abtSysCode, 2);
}

#endif
