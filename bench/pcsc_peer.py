"""The pyscard peer for the pcsc-read benchmark (Debian python3-pyscard, its scard module: the
PC/SC calls themselves, as TagFix makes them): waits for a card in pcscd's first reader
(SCardGetStatusChange), connects (shared, T=0 or T=1), sends the APDUs listed in FILE (one hex
APDU a line, the ones TagFix sent for the same tag), disconnects leaving the card, prints
`read <APDUs>` when done, waits for the card to leave, prints `gone`; N times.
It talks to the pcscd named by PCSCLITE_CSOCK_NAME, set by the benchmark.
Usage: /usr/bin/python3 pcsc_peer.py FILE N"""
import sys

from smartcard import scard


def check(result, what):
    if result != scard.SCARD_S_SUCCESS:
        raise SystemExit(f"{what}: {scard.SCardGetErrorMessage(result)}")


def wait(context, reader, state, present):
    """Waits until the card is (or is not) present; returns the reader's new state."""
    while True:
        result, states = scard.SCardGetStatusChange(context, 500, [(reader, state)])
        if result == scard.SCARD_E_TIMEOUT:
            continue
        check(result, "SCardGetStatusChange")
        _, state, _ = states[0]
        if bool(state & scard.SCARD_STATE_PRESENT) == present:
            return state & ~scard.SCARD_STATE_CHANGED


def main(path, count):
    apdus = [list(bytes.fromhex(line.strip())) for line in open(path) if line.strip()]
    result, context = scard.SCardEstablishContext(scard.SCARD_SCOPE_USER)
    check(result, "SCardEstablishContext")
    result, readers = scard.SCardListReaders(context, [])
    check(result, "SCardListReaders")
    reader = readers[0]
    state = wait(context, reader, scard.SCARD_STATE_UNAWARE, False)
    print("ready", flush=True)
    for _ in range(count):
        state = wait(context, reader, state, True)
        result, card, protocol = scard.SCardConnect(
            context, reader, scard.SCARD_SHARE_SHARED, scard.SCARD_PROTOCOL_T0 | scard.SCARD_PROTOCOL_T1)
        check(result, "SCardConnect")
        for apdu in apdus:
            result, answer = scard.SCardTransmit(card, protocol, apdu)
            check(result, "SCardTransmit")
        scard.SCardDisconnect(card, scard.SCARD_LEAVE_CARD)
        print(f"read {len(apdus)}", flush=True)
        state = wait(context, reader, state, False)
        print("gone", flush=True)
    scard.SCardReleaseContext(context)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
