"""Test tooling: reads the NDEF message of the tag on a PN532 at a serial path with nfcpy
(PyPI nfcpy, driver nfc.clf.pn532) and prints one JSON object. Used by the interop tests to show
that the PN532 emulator is a PN532 to an independent stack. Usage: python nfcpy_read.py /dev/pts/N
"""
import json
import logging
import os
import sys

import nfc
import nfc.clf.pn532
import nfc.clf.transport


def main(path):
    if os.environ.get("TAGFIX_NFCPY_DEBUG"):
        logging.basicConfig(level=1, format="%(name)s %(message)s")
        logging.getLogger("nfc").setLevel(1)
    tty = nfc.clf.transport.TTY(path)
    device = nfc.clf.pn532.init(tty)
    clf = nfc.ContactlessFrontend()
    clf.device = device
    target = clf.sense(nfc.clf.RemoteTarget("106A"), iterations=5, interval=0.1)
    if target is None:
        print(json.dumps({"error": "no tag"}))
        return 1
    tag = nfc.tag.activate(clf, target)
    result = {"uid": tag.identifier.hex().upper(), "type": tag.type, "product": tag.product}
    if tag.ndef is not None:
        result["ndef"] = bytes(tag.ndef.octets).hex().upper()
        result["records"] = [r.type for r in tag.ndef.records]
    else:
        result["ndef"] = None
    print(json.dumps(result))
    clf.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
