#!/usr/bin/env python3
"""Write the TIFF fixtures of tests/data/tiff (run from this folder).

Every base file is written byte by byte here (baseline TIFF 6.0: one IFD,
uncompressed, no library involved) with its pixels saved by numpy as
<name>.npy: what a reader must get.

  <name>.tif      strips of 4 rows, samples interleaved (u16_3: big-endian)
  <name>_st.tif   separate planes, tiles of 16 x 16, big-endian

The other variants are made by libtiff's tiffcp (libtiff-tools 4.5.0) from
the base file or from a copy written here with separate planes in strips
(tiffcp 4.5.0 converts to separate planes only 8-bit samples, and scrambles
16-bit samples in separate tiles, so those are written here):

  <name>_tz.tif   tiles of 16 x 16, deflate with the horizontal predictor
                  (the floating-point predictor for floats)
  <name>_sl.tif   separate planes, strips of 5 rows, LZW with the predictor
  <name>_bb.tif   BigTIFF, big-endian, tiles of 16 x 32, PackBits

and a few files that must be refused: a palette image, a 1-bit image, a
YCbCr JPEG-compressed one (tiffcp -c jpeg).

Usage: python3 make_tiff.py   (needs numpy and tiffcp)
"""
import os
import struct
import subprocess

import numpy as np

W, H, ROWS = 23, 19, 4

# (name, dtype, channels)
CASES = [
    ("u8_1", np.uint8, 1),
    ("u8_2", np.uint8, 2),
    ("u8_3", np.uint8, 3),
    ("u8_4", np.uint8, 4),
    ("u16_1", np.uint16, 1),
    ("u16_3", np.uint16, 3),
    ("u16_4", np.uint16, 4),
    ("f32_1", np.float32, 1),
    ("f32_3", np.float32, 3),
    ("i16_1", np.int16, 1),
    ("f64_1", np.float64, 1),
]

SHORT, LONG, RATIONAL = 3, 4, 5


def entry(tag, typ, values):
    return (tag, typ, list(values))


def write_tiff(path, pixels, photometric, bits=None, sample_format=None, extra=(), extra_tags=(), order="<",
               width=None, planar=1, tile=0):
    """A baseline TIFF of `pixels` (H, W) or (H, W, C): samples contiguous (planar 1) or in
    separate planes (planar 2); strips of ROWS rows, or tiles of tile x tile pixels."""
    h, w = pixels.shape[:2]
    w = width or w
    spp = 1 if pixels.ndim == 2 else pixels.shape[2]
    bits = bits or pixels.dtype.itemsize * 8
    if sample_format is None:
        sample_format = {"u": 1, "i": 2, "f": 3}[pixels.dtype.kind]
    stored = pixels.astype(pixels.dtype.newbyteorder(order)) if bits >= 8 else pixels
    if stored.ndim == 2:
        stored = stored[:, :, None]
    planes = [stored] if planar == 1 else [stored[:, :, i : i + 1] for i in range(stored.shape[2])]
    chunks = []
    for plane in planes:
        if tile:
            padded = np.zeros((-(-h // tile) * tile, -(-plane.shape[1] // tile) * tile, plane.shape[2]), plane.dtype)
            padded[:h, : plane.shape[1]] = plane
            chunks += [padded[y : y + tile, x : x + tile].tobytes() for y in range(0, h, tile)
                       for x in range(0, plane.shape[1], tile)]
        else:
            chunks += [plane[r : r + ROWS].tobytes() for r in range(0, h, ROWS)]
    layout = [entry(322, LONG, [tile]), entry(323, LONG, [tile]), entry(324, LONG, [0] * len(chunks)),
              entry(325, LONG, [len(c) for c in chunks])] if tile else [
        entry(273, LONG, [0] * len(chunks)), entry(278, LONG, [ROWS]), entry(279, LONG, [len(c) for c in chunks])]
    tags = layout + [
        entry(256, LONG, [w]),
        entry(257, LONG, [h]),
        entry(258, SHORT, [bits] * spp),
        entry(259, SHORT, [1]),
        entry(262, SHORT, [photometric]),
        entry(277, SHORT, [spp]),
        entry(282, RATIONAL, [(1, 1)]),
        entry(283, RATIONAL, [(1, 1)]),
        entry(284, SHORT, [planar]),
        entry(296, SHORT, [1]),
    ]
    if extra:
        tags.append(entry(338, SHORT, extra))
    tags.append(entry(339, SHORT, [sample_format] * spp))
    tags += list(extra_tags)
    tags.sort(key=lambda t: t[0])
    size = {SHORT: 2, LONG: 4, RATIONAL: 8}

    def pack(typ, vals):
        if typ == RATIONAL:
            return b"".join(struct.pack(order + "II", *v) for v in vals)
        return struct.pack(order + ("H" if typ == SHORT else "I") * len(vals), *vals)

    ifd_at = 8
    ifd_len = 2 + 12 * len(tags) + 4
    out_of_line = ifd_at + ifd_len
    blobs, cursor = {}, out_of_line
    for tag, typ, vals in tags:
        n = size[typ] * len(vals)
        if n > 4:
            blobs[tag] = cursor
            cursor += n + (n & 1)
    chunk_at = []
    for c in chunks:
        chunk_at.append(cursor)
        cursor += len(c)
    for t in tags:
        if t[0] in (273, 324):
            t[2][:] = chunk_at
    head = (b"II" if order == "<" else b"MM") + struct.pack(order + "HI", 42, ifd_at)
    ifd = struct.pack(order + "H", len(tags))
    tail = b""
    for tag, typ, vals in tags:
        raw = pack(typ, vals)
        if len(raw) > 4:
            ifd += struct.pack(order + "HHII", tag, typ, len(vals), blobs[tag])
            tail += raw + b"\0" * (len(raw) & 1)
        else:
            ifd += struct.pack(order + "HHI", tag, typ, len(vals)) + raw.ljust(4, b"\0")
    ifd += struct.pack(order + "I", 0)
    with open(path, "wb") as f:
        f.write(head + ifd + tail + b"".join(chunks))


def pixels_of(dtype, c, seed):
    rng = np.random.default_rng(seed)
    shape = (H, W) if c == 1 else (H, W, c)
    if np.dtype(dtype).kind == "f":
        a = rng.normal(0, 1000, shape).astype(dtype)
        a.flat[0], a.flat[1], a.flat[2] = -0.0, np.inf, -3.4e38 if dtype == np.float32 else -1e300
        return a
    info = np.iinfo(dtype)
    a = rng.integers(info.min, int(info.max) + 1, shape, dtype=np.int64).astype(dtype)
    a.flat[0], a.flat[1] = info.min, info.max
    # smooth parts too, where the predictor's differences are small
    ramp = (np.arange(W)[None, :] + np.arange(H)[:, None]).astype(dtype)
    a[H // 2 :, :, ...] = ramp[H // 2 :, :, None] if c > 1 else ramp[H // 2 :, :]
    return a


def tiffcp(args, src, dst):
    subprocess.run(["tiffcp", *args, src, dst], check=True)


def main():
    for seed, (name, dtype, c) in enumerate(CASES):
        a = pixels_of(dtype, c, seed + 1)
        np.save(name + ".npy", a)
        photometric = 2 if c >= 3 else 1
        extra = [2] if c in (2, 4) else []  # unassociated alpha
        write_tiff(name + ".tif", a, photometric, extra=extra, order=">" if name == "u16_3" else "<")
        write_tiff("sep.tmp", a, photometric, extra=extra, planar=2)
        write_tiff(name + "_st.tif", a, photometric, extra=extra, planar=2, tile=16, order=">")
        pred = "3" if a.dtype.kind == "f" else "2"
        tiffcp(["-t", "-w", "16", "-l", "16", "-c", "zip:" + pred], name + ".tif", name + "_tz.tif")
        tiffcp(["-r", "5", "-c", "lzw:" + pred], "sep.tmp", name + "_sl.tif")
        tiffcp(["-8", "-B", "-t", "-w", "16", "-l", "32", "-c", "packbits"], name + ".tif", name + "_bb.tif")
        os.remove("sep.tmp")
    # refused: palette, 1-bit, YCbCr JPEG
    idx = (np.arange(H * W).reshape(H, W) % 4).astype(np.uint8)
    cmap = [i * 257 for i in range(256)] * 3
    write_tiff("palette.tif", idx, 3, extra_tags=[entry(320, SHORT, cmap)])
    write_tiff("bilevel.tif", np.packbits(idx[:, :16] & 1, axis=1), 1, bits=1, width=16)  # 16 x 19 pixels
    tiffcp(["-c", "jpeg", "-r", "16"], "u8_3.tif", "ycbcr_jpeg.tif")


if __name__ == "__main__":
    main()
