#!/usr/bin/env python3
"""RSS over time from serve_soak.mjs's CSV as a PNG line plot, with no plotting library: a white
canvas, grey axes, one blue line (time on x, RSS on y from 0 to the maximum; the numbers are in
the soak's printed summary). Usage: serve_soak_plot.py IN.csv OUT.png"""
import struct
import sys
import zlib

W, H, PAD = 800, 400, 40


def png(pixels):
    raw = b"".join(b"\x00" + bytes(row) for row in pixels)
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def main():
    rows = [line.split(",") for line in open(sys.argv[1]).read().split("\n")[1:] if line]
    points = [(float(t), float(r)) for t, r in rows]
    pixels = [[255] * (3 * W) for _ in range(H)]
    def put(x, y, rgb):
        if 0 <= x < W and 0 <= y < H:
            pixels[y][3 * x:3 * x + 3] = rgb
    for x in range(PAD, W - PAD):
        put(x, H - PAD, (128, 128, 128))
    for y in range(PAD, H - PAD):
        put(PAD, y, (128, 128, 128))
    t_max = max(t for t, _ in points) or 1
    r_max = max(r for _, r in points) or 1
    def to_pixel(t, r):
        return (PAD + int(t / t_max * (W - 2 * PAD)), H - PAD - int(r / r_max * (H - 2 * PAD)))
    for (t0, r0), (t1, r1) in zip(points, points[1:]):
        (x0, y0), (x1, y1) = to_pixel(t0, r0), to_pixel(t1, r1)
        steps = max(abs(x1 - x0), abs(y1 - y0), 1)
        for i in range(steps + 1):
            x, y = x0 + (x1 - x0) * i // steps, y0 + (y1 - y0) * i // steps
            for dy in (0, 1):
                put(x, y + dy, (30, 90, 200))
    open(sys.argv[2], "wb").write(png(pixels))


if __name__ == "__main__":
    main()
