"""The nfcpy peer for the tag-read benchmark (PyPI nfcpy, driver nfc.clf.pn532, in the benchmark's
own virtualenv): waits for a tag on the PN532 at PATH, reads its NDEF message, prints
`read <bytes>` when done, waits for the tag to leave, prints `gone`, N times.
Usage: python nfcpy_peer.py PATH N"""
import sys

import nfc
import nfc.clf.pn532
import nfc.clf.transport


def main(path, count):
    clf = nfc.ContactlessFrontend()
    clf.device = nfc.clf.pn532.init(nfc.clf.transport.TTY(path))
    print("ready", flush=True)
    for _ in range(count):
        # On a busy machine (CI, a build beside it) nfcpy's driver can time out an exchange with
        # the emulator: the read is tried again, as a person taps again (at most 20 times), instead
        # of the peer dying and the benchmark losing its number. A quiet run reads at once.
        octets = None
        for attempt in range(20):
            try:
                target = None
                while target is None:
                    target = clf.sense(nfc.clf.RemoteTarget("106A"), iterations=1, interval=0.01)
                tag = nfc.tag.activate(clf, target)
                if tag is None:
                    continue
                octets = bytes(tag.ndef.octets) if tag.ndef is not None else b""
                break
            except (nfc.clf.CommunicationError, nfc.tag.TagCommandError, IOError) as error:
                print(f"nfcpy peer: read attempt {attempt + 1} failed: {error!r}", file=sys.stderr, flush=True)
        if octets is None:
            sys.exit("nfcpy peer: no read in 20 attempts")
        print(f"read {len(octets)}", flush=True)
        while True:
            try:
                if clf.sense(nfc.clf.RemoteTarget("106A"), iterations=1, interval=0.01) is None:
                    break
            except (nfc.clf.CommunicationError, IOError):
                pass
        print("gone", flush=True)
    clf.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
