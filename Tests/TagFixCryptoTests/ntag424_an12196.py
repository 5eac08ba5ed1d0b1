#!/usr/bin/env python3
# Independent recomputation, with python-cryptography (not libcrypto through TagFix), of the AN12196
# NTAG 424 DNA values pinned in NTAG424Tests.swift. Test tooling only: python3 ntag424_an12196.py
# (exits non-zero on the first mismatch).
import zlib

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.cmac import CMAC

h = bytes.fromhex
Z = bytes(16)


def cbc(key, iv, data, encrypt=True):
    c = Cipher(algorithms.AES(key), modes.CBC(iv))
    op = c.encryptor() if encrypt else c.decryptor()
    return op.update(data) + op.finalize()


def cmac(key, message):
    c = CMAC(algorithms.AES(key))
    c.update(message)
    return c.finalize()


def mact(full):
    return full[1::2]


def pad(data):
    data += b"\x80"
    return data + b"\0" * (-len(data) % 16)


def check(name, got, want):
    assert got == h(want), f"{name}: {got.hex().upper()} != {want}"
    print(f"ok  {name}")


# AuthenticateEV2First, key 0 all zero.
rnda = h("13C5DB8A5930439FC3DEF9A4C675360F")
rndb = cbc(Z, Z, h("A04C124213C186F22399D33AC2A30215"), encrypt=False)
check("RndB", rndb, "B9E2FC789B64BF237CCCAA20EC7E6E48")
check("E(RndA || RndB')", cbc(Z, Z, rnda + rndb[1:] + rndb[:1]),
      "35C3E05A752E0144BAC0DE51C1F22C56B34408A23D8AEA266CAB947EA8E0118D")
answer = cbc(Z, Z, h("3FA64DB5446D1F34CD6EA311167F5E4985B89690C04A05F17FA7AB2F08120663"), encrypt=False)
check("TI", answer[:4], "9D00C4DF")
check("RndA'", answer[4:20], (rnda[1:] + rnda[:1]).hex())


def sv(label):
    mixed = bytes(a ^ b for a, b in zip(rnda[2:8], rndb[0:6]))
    return label + h("00010080") + rnda[0:2] + mixed + rndb[6:16] + rnda[8:16]


check("SesAuthENCKey", cmac(Z, sv(h("A55A"))), "1309C877509E5A215007FF0ED19CA564")
check("SesAuthMACKey", cmac(Z, sv(h("5AA5"))), "4C6626F5E72EA694202139295C7A7FC7")

# ChangeFileSettings at CmdCtr 1.
enc, mac, ti = h("1309C877509E5A215007FF0ED19CA564"), h("4C6626F5E72EA694202139295C7A7FC7"), h("9D00C4DF")
iv = cbc(enc, Z, h("A55A") + ti + h("0100") + bytes(8))
check("ChangeFileSettings IVc", iv, "3E27082AB2ACC1EF55C57547934E9962")
data = cbc(enc, iv, pad(h("4000E0C1F121200000430000430000")))
check("ChangeFileSettings data", data, "61B6D97903566E84C3AE5274467E89EA")
check("ChangeFileSettings MACt", mact(cmac(mac, h("5F0100") + ti + h("02") + data)), "D799B7C1A0EF7A04")
check("ChangeFileSettings answer MACt", mact(cmac(mac, h("000200") + ti)), "57BFF87B1241E93D")

# ChangeKey: key 2 at CmdCtr 2 (XOR, CRC32), key 0 at CmdCtr 3.
enc, mac, ti = h("4CF3CB41A22583A61E89B158D252FC53"), h("5529860B2FC5FB6154B7F28361D30BF9"), h("7614281A")
new2 = h("F3847D627727ED3BC9C4CC050489B966")
crc = (zlib.crc32(new2) ^ 0xFFFFFFFF).to_bytes(4, "little")
check("CRC32(NewKey)", crc, "789DFADC")
iv = cbc(enc, Z, h("A55A") + ti + h("0200") + bytes(8))
data = cbc(enc, iv, pad(new2 + b"\x01" + crc))
check("ChangeKey 2 data", data, "2CF362B7BF4311FF3BE1DAA295E8C68DE09050560D19B9E16C2393AE9CD1FAC7")
check("ChangeKey 2 MACt", mact(cmac(mac, h("C40200") + ti + h("02") + data)), "5D0CE20BCD1D06E6")
check("ChangeKey 2 answer MACt", mact(cmac(mac, h("000300") + ti)), "203BB55D1089D587")
iv = cbc(enc, Z, h("A55A") + ti + h("0300") + bytes(8))
check("ChangeKey 0 IVc", iv, "01602D579423B2797BE8B478B0B4D27B")
data = cbc(enc, iv, pad(h("5004BF991F408672B1EF00F08F9E8647") + b"\x01"))
check("ChangeKey 0 data", data, "C0EB4DEEFEDDF0B513A03A95A75491818580503190D4D05053FF75668A01D6FD")
check("ChangeKey 0 MACt", mact(cmac(mac, h("C40300") + ti + h("00") + data)), "A6610234BDED6432")

# GetFileSettings in CommMode.MAC.
mac, ti = h("8248134A386E86EB7FAF54A52E536CB6"), h("7A21085E")
check("GetFileSettings MACt", mact(cmac(mac, h("F50000") + ti + h("02"))), "6597A457C8CD442C")
check("GetFileSettings answer MACt",
      mact(cmac(mac, h("000100") + ti + h("0040EEEE000100D1FE001F00004400004400002000006A0000"))), "2A474282E7A47986")

# SUN session keys, AN12196 Table 1.
k = h("5ACE7E50AB65D5D51FD5BF5A16B8205B")
check("KSesSDMFileReadENC", cmac(k, h("C33C0001008004C767F2066180010000")), "66DA61797E23DECA5D8ECA13BBADF7A9")
check("KSesSDMFileReadMAC", cmac(k, h("3CC30001008004C767F2066180010000")), "3A3E8110E05311F7A3FCF0D969BF2B48")
