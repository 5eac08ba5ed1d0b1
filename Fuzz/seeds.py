#!/usr/bin/env python3
"""Builds each fuzz target's seed corpus from the shared reference data, in place (nothing of it is
copied into the repository): python3 Fuzz/seeds.py TESTDATA OUT. Writes OUT/TARGET/NAME files.
Test tooling only."""
import glob, hashlib, json, os, sys

testdata, out = sys.argv[1], sys.argv[2]


def put(target, data):
    if isinstance(data, str):
        data = data.encode()
    folder = os.path.join(out, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, hashlib.sha1(data).hexdigest()[:16]), "wb") as f:
        f.write(data)


def hexbytes(text):
    return bytes.fromhex(text) if text else b""


def load(path):
    with open(path) as f:
        return json.load(f)


for vector in load(f"{testdata}/ndef/ndeflib_vectors.json"):
    for key in ("full_record_hex_constructed", "message_hex", "record_hex"):
        if vector.get(key):
            put("ndef-message", hexbytes(vector[key]))
    uri = (vector.get("expected") or {}).get("uri")
    if uri:
        put("url-location", uri)

for path in sorted(glob.glob(f"{testdata}/nfc/tags/*.json")):
    tag = load(path)
    put("dump", open(path, "rb").read())
    put("json", open(path, "rb").read())
    memory = hexbytes(tag.get("memory_hex") or "")
    if "mifare" in (tag.get("chip") or "").lower() or "classic" in path:
        put("mifare-classic", b"\x00" + memory)
    elif memory:
        put("type2-memory", memory)
    if tag.get("expected_ndef_message_hex"):
        put("ndef-message", hexbytes(tag["expected_ndef_message_hex"]))
    for record in tag.get("expected_records") or []:
        for key in ("uri", "decoded_uri"):
            if isinstance(record.get(key), str):
                put("url-location", record[key])
    if tag.get("get_version_hex"):
        put("type2-memory", hexbytes(tag["get_version_hex"]) + memory)

for case in load(f"{testdata}/nfc/tt2_edge_cases_nfcpy.json"):
    put("type2-memory", hexbytes(case["memory_hex"]))

for case in load(f"{testdata}/nfc/tt4_cases_nfcpy.json"):
    cc = hexbytes(case.get("cc_file_hex") or "")
    ndef = hexbytes(case.get("ndef_file_hex") or "")
    put("type4-file", bytes([len(cc) & 0x3F]) + cc + ndef)

for path in sorted(glob.glob(f"{testdata}/nfc/flipper/*.nfc") + glob.glob(f"{testdata}/nfc/proxmark/*.json")):
    put("dump", open(path, "rb").read())

for path in sorted(glob.glob(f"{testdata}/nmea/gpsd/*.chk")):
    lines = open(path, "rb").read().splitlines(keepends=True)
    for start in range(0, len(lines), 20):
        put("gpsd-report", b"".join(lines[start:start + 20]))
        put("json", lines[start])
