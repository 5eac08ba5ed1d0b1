"""An MQTT 5 broker that only ever hands a session over (test tooling): it accepts each
connection (CONNACK 0), grants each SUBSCRIBE (SUBACK QoS 1), and then, AFTER seconds after the
CONNACK, ends the connection with DISCONNECT 0x8E (session taken over), as mosquitto from 2.0.15,
EMQX and HiveMQ do when another client connects with the same client id. AFTER is given per
connection: the first number for the first connection, the last for every later one.

Prints "port N" once it listens on 127.0.0.1, then "connection K" as each is accepted and
"disconnected K" as each is ended. Runs until killed.

usage: python3 taking_broker.py AFTER [AFTER ...]"""
import socket, sys, threading, time
# A line in one write, even under PYTHONUNBUFFERED=1 (which writes print's pieces one by one): the
# test reads the lines as they come, and a line read half-written was taken for the whole.
sys.stdout.reconfigure(line_buffering=True, write_through=False)

delays = [float(a) for a in sys.argv[1:]] or [0.1]


def read_packet(conn):
    """One MQTT packet: (first byte, body), or None at the end of the stream."""
    head = conn.recv(1)
    if not head:
        return None
    length, shift = 0, 0
    while True:
        byte = conn.recv(1)
        if not byte:
            return None
        length |= (byte[0] & 0x7F) << shift
        shift += 7
        if byte[0] & 0x80 == 0:
            break
    body = b""
    while len(body) < length:
        chunk = conn.recv(length - len(body))
        if not chunk:
            return None
        body += chunk
    return head[0], body


def serve(conn, number):
    after = delays[min(number - 1, len(delays) - 1)]
    packet = read_packet(conn)
    if packet is None or packet[0] >> 4 != 1:  # CONNECT
        conn.close()
        return
    conn.sendall(bytes([0x20, 0x03, 0x00, 0x00, 0x00]))  # CONNACK: no session, success, no properties
    print("connection %d" % number, flush=True)
    deadline = time.monotonic() + after

    def reader():
        while True:
            try:
                packet = read_packet(conn)
            except OSError:
                return
            if packet is None:
                return
            kind, body = packet
            if kind >> 4 == 8:  # SUBSCRIBE (collect asks for one filter): grant it QoS 1
                try:
                    conn.sendall(bytes([0x90, 0x04]) + body[:2] + b"\x00\x01")
                except OSError:
                    return
            elif kind >> 4 == 12:  # PINGREQ
                try:
                    conn.sendall(bytes([0xD0, 0x00]))
                except OSError:
                    return

    threading.Thread(target=reader, daemon=True).start()
    time.sleep(max(0.0, deadline - time.monotonic()))
    try:
        conn.sendall(bytes([0xE0, 0x02, 0x8E, 0x00]))  # DISCONNECT: session taken over
        print("disconnected %d" % number, flush=True)
        time.sleep(0.05)
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    conn.close()


listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", 0))
listener.listen(8)
print("port %d" % listener.getsockname()[1], flush=True)
count = 0
while True:
    conn, _ = listener.accept()
    count += 1
    threading.Thread(target=serve, args=(conn, count), daemon=True).start()
