#!/usr/bin/env python3
# Independent recomputation, with python-cryptography (not libcrypto through TagFix), of the AN12196
# NTAG 424 DNA values pinned in NTAG424Tests.swift. Test tooling only: python3 ntag424_an12196.py
import zlib
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.cmac import CMAC as _CMAC
h = bytes.fromhex
def cbc_enc(k, iv, d): e = Cipher(algorithms.AES(k), modes.CBC(iv)).encryptor(); return e.update(d) + e.finalize()
def cbc_dec(k, iv, d): e = Cipher(algorithms.AES(k), modes.CBC(iv)).decryptor(); return e.update(d) + e.finalize()
def cmac(k, m): c = _CMAC(algorithms.AES(k)); c.update(m); return c.finalize()
def mact(m): return m[1::2]
def pad(d): d = d + b"\x80"; return d + b"\0" * (-len(d) % 16)
Z = bytes(16)
# Auth key 0
rnda = h("13C5DB8A5930439FC3DEF9A4C675360F")
rndb = cbc_dec(Z, Z, h("A04C124213C186F22399D33AC2A30215"))
print("RndB", rndb.hex().upper())
part2 = cbc_enc(Z, Z, rnda + rndb[1:] + rndb[:1])
print("part2", part2.hex().upper(), part2 == h("35C3E05A752E0144BAC0DE51C1F22C56B34408A23D8AEA266CAB947EA8E0118D"))
resp = cbc_dec(Z, Z, h("3FA64DB5446D1F34CD6EA311167F5E4985B89690C04A05F17FA7AB2F08120663"))
print("resp", resp.hex().upper(), resp[4:20] == rnda[1:] + rnda[:1])
def sv(label):
    x = bytes(a ^ b for a, b in zip(rnda[2:8], rndb[0:6]))
    return label + h("00010080") + rnda[0:2] + x + rndb[6:16] + rnda[8:16]
print("enc", cmac(Z, sv(h("A55A"))).hex().upper(), "mac", cmac(Z, sv(h("5AA5"))).hex().upper())
# ChangeFileSettings
enc, mac, ti = h("1309C877509E5A215007FF0ED19CA564"), h("4C6626F5E72EA694202139295C7A7FC7"), h("9D00C4DF")
iv = cbc_enc(enc, Z, h("A55A") + ti + h("0100") + bytes(8))
e = cbc_enc(enc, iv, pad(h("4000E0C1F121200000430000430000")))
m = mact(cmac(mac, h("5F") + h("0100") + ti + h("02") + e))
print("cfs", iv.hex().upper(), e.hex().upper(), m.hex().upper())
print("cfs resp", mact(cmac(mac, h("00") + h("0200") + ti)).hex().upper())
# ChangeKey key 2
enc, mac, ti = h("4CF3CB41A22583A61E89B158D252FC53"), h("5529860B2FC5FB6154B7F28361D30BF9"), h("7614281A")
nk = h("F3847D627727ED3BC9C4CC050489B966")
crc = (zlib.crc32(nk) ^ 0xFFFFFFFF).to_bytes(4, "little")
print("crc", crc.hex().upper())
iv = cbc_enc(enc, Z, h("A55A") + ti + h("0200") + bytes(8))
e = cbc_enc(enc, iv, pad(nk + b"\x01" + crc))
m = mact(cmac(mac, h("C4") + h("0200") + ti + h("02") + e))
print("ck2", iv.hex().upper(), e.hex().upper(), m.hex().upper())
print("ck2 resp", mact(cmac(mac, h("00") + h("0300") + ti)).hex().upper())
nk0 = h("5004BF991F408672B1EF00F08F9E8647")
iv = cbc_enc(enc, Z, h("A55A") + ti + h("0300") + bytes(8))
e = cbc_enc(enc, iv, pad(nk0 + b"\x01"))
m = mact(cmac(mac, h("C4") + h("0300") + ti + h("00") + e))
print("ck0", iv.hex().upper(), e.hex().upper(), m.hex().upper())
# GetFileSettings MAC
mac, ti = h("8248134A386E86EB7FAF54A52E536CB6"), h("7A21085E")
print("gfs", mact(cmac(mac, h("F5") + h("0000") + ti + h("02"))).hex().upper())
print("gfs resp", mact(cmac(mac, h("00") + h("0100") + ti + h("0040EEEE000100D1FE001F00004400004400002000006A0000"))).hex().upper())
# SUN session keys, AN12196 §3.3 Table 1
k = h("5ACE7E50AB65D5D51FD5BF5A16B8205B")
print("sv1", cmac(k, h("C33C0001008004C767F2066180010000")).hex().upper(), "sv2", cmac(k, h("3CC30001008004C767F2066180010000")).hex().upper())
