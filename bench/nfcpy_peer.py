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
        target = None
        while target is None:
            target = clf.sense(nfc.clf.RemoteTarget("106A"), iterations=1, interval=0.01)
        tag = nfc.tag.activate(clf, target)
        octets = bytes(tag.ndef.octets) if tag.ndef is not None else b""
        print(f"read {len(octets)}", flush=True)
        while clf.sense(nfc.clf.RemoteTarget("106A"), iterations=1, interval=0.01) is not None:
            pass
        print("gone", flush=True)
    clf.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
