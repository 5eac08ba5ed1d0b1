#!/usr/bin/env python3
"""The phone-tap benchmark's peer: a SUN backend built the way the open ones are (a Flask app and
a crypto library, as nfc-developer/sdm-backend is), written for the benchmark.

It takes the same POST TagFix's tap page sends (POST /api/tap, JSON: url, lat, lon, accuracy_m,
the token in the tagfix_token cookie), checks the NTAG 424 DNA SUN in the URL (NXP AN12196: the
PICC data decrypted with the meta-read key, KSesSDMFileReadMAC = CMAC(file-read key, SV2), SDMMAC =
CMAC(session key, MAC input) with its odd bytes kept) and the position against the tag's spot, and
answers a JSON verdict. It keeps no read counter (a replayed URL passes) and writes nothing.

  sun_peer_flask.py serve TAGS.json [PORT]   serve on 127.0.0.1, PORT or a free one; prints "ready PORT"
  sun_peer_flask.py selfcheck           AN12196's published examples (exit 1 if one fails)
  sun_peer_flask.py loop URLS.txt N     the check alone, in this process: prints verifications/s
TAGS.json: {"meta_key": HEX, "file_key": HEX, "token": TOKEN, "picc": NAME, "cmac": NAME,
            "tags": {"ID": [lat, lon, radius_m], ...}}
"""
import hmac
import json
import math
import sys
import time
from urllib.parse import parse_qsl, urlsplit

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.cmac import CMAC


def cmac(key, data):
    mac = CMAC(algorithms.AES(key))
    mac.update(data)
    return mac.finalize()


def decrypt_picc(meta_key, picc):
    decryptor = Cipher(algorithms.AES(meta_key), modes.CBC(bytes(16))).decryptor()
    plain = decryptor.update(picc) + decryptor.finalize()
    tag = plain[0]
    if tag & 0x80 == 0 or tag & 0x0F != 7:
        return None
    uid = plain[1:8]
    counter = int.from_bytes(plain[8:11], "little") if tag & 0x40 else None
    return uid, counter


def sdm_mac(file_key, uid, counter, mac_input=b""):
    sv2 = bytes([0x3C, 0xC3, 0x00, 0x01, 0x00, 0x80]) + uid
    if counter is not None:
        sv2 += counter.to_bytes(3, "little")
    sv2 += bytes(16 - len(sv2) % 16) if len(sv2) % 16 else b""
    session = cmac(file_key, sv2)
    return cmac(session, mac_input)[1::2]


def check_sun(url, meta_key, file_key, picc_name, cmac_name):
    """(uid hex, counter) when the URL's SUN verifies, else None. The MAC input is empty (the
    templates TagFix writes mirror no MAC input), as in AN12196's first example."""
    query = dict(parse_qsl(urlsplit(url).query))
    try:
        picc = bytes.fromhex(query[picc_name])
        mac = bytes.fromhex(query[cmac_name])
    except (KeyError, ValueError):
        return None
    if len(picc) != 16 or len(mac) != 8:
        return None
    found = decrypt_picc(meta_key, picc)
    if found is None:
        return None
    uid, counter = found
    # A real backend compares in constant time; so does this one.
    if not hmac.compare_digest(sdm_mac(file_key, uid, counter), mac):
        return None
    return uid.hex().upper(), counter


def distance_m(lat1, lon1, lat2, lon2):
    r = 6371008.8
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * r * math.asin(math.sqrt(a))


def selfcheck():
    zero = bytes(16)
    # AN12196 §3.4 (and the repo's SUN tests): UID 04DE5F1EACC040, SDMReadCtr 61, all-zero keys.
    url = "https://ntag.nxp.com/424?e=EF963FF7828658A599F3041510671E88&c=94EED9EE65337086"
    got = check_sun(url, zero, zero, "e", "c")
    ok = got == ("04DE5F1EACC040", 61)
    tampered = url[:-1] + "7"
    ok = ok and check_sun(tampered, zero, zero, "e", "c") is None
    # The SDMENCFileData example (picc_data=FD91…&enc=CEE9…&cmac=ECC1…): UID 04958CAA5C5E80,
    # counter 8, the MAC over "ENC&cmac=".
    uid, counter = decrypt_picc(zero, bytes.fromhex("FD91EC264309878BE6345CBE53BADF40"))
    ok = ok and uid.hex().upper() == "04958CAA5C5E80" and counter == 8
    mac_input = b"CEE9A53E3E463EF1F459635736738962&cmac="
    ok = ok and sdm_mac(zero, uid, counter, mac_input) == bytes.fromhex("ECC1E7F6C6C73BF6")
    print(json.dumps({"bench": "phone-tap-peer-selfcheck", "ok": ok, "vectors": 3}))
    return 0 if ok else 1


def load(path):
    spec = json.load(open(path))
    return (bytes.fromhex(spec["meta_key"]), bytes.fromhex(spec["file_key"]), spec["token"], spec["picc"], spec["cmac"],
            {k: tuple(v) for k, v in spec["tags"].items()})


def serve(path, port=0):
    from flask import Flask, jsonify, request
    from werkzeug import serving
    from werkzeug.serving import make_server, WSGIRequestHandler
    import logging
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    meta_key, file_key, token, picc_name, cmac_name, tags = load(path)
    app = Flask("sun_peer")

    @app.post("/api/tap")
    def tap():
        if request.cookies.get("tagfix_token") != token:
            return jsonify(error="no token"), 403
        body = request.get_json(silent=True)
        if not isinstance(body, dict) or not isinstance(body.get("url"), str):
            return jsonify(error="bad body"), 400
        url = body["url"]
        tag_id = urlsplit(url).path.rsplit("/", 1)[-1]
        spot = tags.get(tag_id)
        if spot is None:
            return jsonify(verdict="notRegistered")
        sun = check_sun(url, meta_key, file_key, picc_name, cmac_name)
        if sun is None:
            return jsonify(verdict="untrusted", reason="sun_invalid")
        try:
            lat, lon, accuracy = float(body["lat"]), float(body["lon"]), float(body["accuracy_m"])
        except (KeyError, TypeError, ValueError):
            return jsonify(error="bad position"), 400
        distance = distance_m(lat, lon, spot[0], spot[1])
        kind = "confirmed" if distance <= spot[2] and accuracy <= spot[2] * 4 else "outside"
        return jsonify(verdict=kind, tag=tag_id, sun_counter=sun[1], distance_m=round(distance, 1))

    WSGIRequestHandler.protocol_version = "HTTP/1.1"
    # 200 phones connect at once: a listen queue that holds them all (werkzeug's is 128).
    serving.LISTEN_QUEUE = 1024
    serving.BaseWSGIServer.request_queue_size = 1024
    server = make_server("127.0.0.1", port, app, threaded=True)
    server.daemon_threads = True
    print(f"ready {server.server_port}", flush=True)
    server.serve_forever()


def loop(path, urls_path, seconds):
    meta_key, file_key, _, picc_name, cmac_name, _ = load(path)
    urls = [line.strip() for line in open(urls_path) if line.strip()]
    done = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for url in urls:
            if check_sun(url, meta_key, file_key, picc_name, cmac_name) is None:
                raise SystemExit(f"the peer does not verify {url}")
            done += 1
    elapsed = time.perf_counter() - start
    print(json.dumps({"bench": "phone-tap", "side": "peer", "path": "in-process", "verifications": done,
                      "per_second": done / elapsed}), flush=True)


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "selfcheck":
        sys.exit(selfcheck())
    elif command == "serve":
        serve(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 0)
    elif command == "loop":
        loop(sys.argv[2], sys.argv[3], float(sys.argv[4]) if len(sys.argv) > 4 else 2.0)
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(64)
