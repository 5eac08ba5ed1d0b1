"""Reads a screenshot's pixels (test tooling): the PNGs Chromium writes, decoded with zlib alone."""
import struct, zlib


def pixels(png):
    """The RGB of every pixel of an 8-bit RGB or RGBA, non-interlaced PNG: rows of tuples."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    at, data, width, height, kind = 8, b"", 0, 0, 0
    while at < len(png):
        length, name = struct.unpack(">I4s", png[at:at + 8])
        body = png[at + 8:at + 8 + length]
        if name == b"IHDR":
            width, height, depth, kind, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and kind in (2, 6) and interlace == 0, "unexpected PNG"
        elif name == b"IDAT":
            data += body
        at += 12 + length
    step = 4 if kind == 6 else 3
    raw, rows, previous = zlib.decompress(data), [], bytearray(width * step)
    stride = width * step
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - step] if i >= step else 0
            b, c = previous[i], previous[i - step] if i >= step else 0
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + b) & 255
            elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * step:x * step + 3]) for x in range(width)])
        previous = line
    return rows
