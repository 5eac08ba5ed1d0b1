#!/usr/bin/env python3
"""Independent check of NXP originality signatures for the tests (no OpenSSL, no TagFix code).

ECDSA verification on SECG secp128r1 written out with Python integers (SEC 1 v2 §4.1.4, curve
parameters from SEC 2 v1 §2.3.1). NXP signs the UID itself: the 7 UID bytes are the ECDSA
"digest" e, unhashed. Usage: nxp_originality.py UIDHEX SIGHEX  -> prints the name of the key that
verifies (NXP NTAG21x / NXP Ultralight EV1), "zero" for 32 zero bytes, or "none".
"""
import sys

P = 0xFFFFFFFDFFFFFFFFFFFFFFFFFFFFFFFF
A = 0xFFFFFFFDFFFFFFFFFFFFFFFFFFFFFFFC
B = 0xE87579C11079F43DD824993C2CEE5ED3
G = (0x161FF7528B899B2D0C28607CA52C5B86, 0xCF5AC8395BAFEB13C02DA292DDED7A83)
N = 0xFFFFFFFE0000000075A30D1B9038A115

KEYS = {
    "NXP NTAG21x": "04494E1A386D3D3CFE3DC10E5DE68A499B1C202DB5B132393E89ED19FE5BE8BC61",
    "NXP Ultralight EV1": "0490933BDCD6E99B4E255E3DA55389A827564E11718E017292FAF23226A96614B8",
}


def add(p1, p2):
    if p1 is None:
        return p2
    if p2 is None:
        return p1
    (x1, y1), (x2, y2) = p1, p2
    if x1 == x2 and (y1 + y2) % P == 0:
        return None
    if p1 == p2:
        m = (3 * x1 * x1 + A) * pow(2 * y1, -1, P) % P
    else:
        m = (y2 - y1) * pow(x2 - x1, -1, P) % P
    x3 = (m * m - x1 - x2) % P
    return (x3, (m * (x1 - x3) - y1) % P)


def mul(k, point):
    result = None
    while k:
        if k & 1:
            result = add(result, point)
        point = add(point, point)
        k >>= 1
    return result


def point(hex_key):
    raw = bytes.fromhex(hex_key)
    assert raw[0] == 4 and len(raw) == 33
    q = (int.from_bytes(raw[1:17], "big"), int.from_bytes(raw[17:], "big"))
    assert (q[1] ** 2 - (q[0] ** 3 + A * q[0] + B)) % P == 0, "key not on the curve"
    return q


def verify(q, message, signature):
    r, s = int.from_bytes(signature[:16], "big"), int.from_bytes(signature[16:], "big")
    if not (0 < r < N and 0 < s < N):
        return False
    e = int.from_bytes(message, "big")  # 56 bits < 128: no truncation
    w = pow(s, -1, N)
    x = add(mul(e * w % N, G), mul(r * w % N, q))
    return x is not None and x[0] % N == r


def main():
    uid, sig = bytes.fromhex(sys.argv[1]), bytes.fromhex(sys.argv[2])
    if not any(sig):
        print("zero")
        return
    for name, key in KEYS.items():
        if len(sig) == 32 and verify(point(key), uid, sig):
            print(name)
            return
    print("none")


if __name__ == "__main__":
    main()
