#!/usr/bin/env python3
"""Write the fuzz harnesses' seed corpora, tests/fuzz/corpus/<harness>/.

Seeds are tiny valid (and a few nearly valid) files: copies of test data
(tests/data/npy, hash, png_edge, gray) and files written here byte by byte
(raw requests, PGM/PPM, TIFF strips and tiles, index files), so the corpus
is reproducible with the standard library alone:

    python3 tests/fuzz/make_corpus.py
"""
import os
import shutil
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, '..', 'data')
CORPUS = os.path.join(HERE, 'corpus')


def out(harness, name, data):
    d = os.path.join(CORPUS, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data)


def copy(harness, *parts):
    d = os.path.join(CORPUS, harness)
    os.makedirs(d, exist_ok=True)
    shutil.copyfile(os.path.join(DATA, *parts), os.path.join(d, parts[-1]))


def pattern(n, seed=1):
    """n deterministic pseudo-random bytes (a 32-bit LCG)."""
    x, b = seed, bytearray()
    for _ in range(n):
        x = (1103515245 * x + 12345) & 0x7fffffff
        b.append(x >> 16 & 0xff)
    return bytes(b)


# ------------------------------------------------------------------ npy
def npy():
    for name in sorted(os.listdir(os.path.join(DATA, 'npy'))):
        copy('npy', 'npy', name)


# ------------------------------------------------------------------ raw
DTYPES = {'u1': 1, 'i1': 2, 'u2': 3, 'i2': 4, 'u4': 5, 'i4': 6, 'u8': 7, 'i8': 8, 'f4': 9, 'f8': 10}
SIZES = {1: 1, 2: 1, 3: 2, 4: 2, 5: 4, 6: 4, 7: 8, 8: 8, 9: 4, 10: 8}


def raw_fitted(dtype, lead, offset, last):
    """A fitted request: extents lead..., then `last`, after `offset` header bytes."""
    d = DTYPES[dtype]
    n = SIZES[d] * last
    for e in lead:
        n *= e
    head = bytes([d, len(lead) + 1, 0, offset]) + bytes(e - 1 for e in lead)
    return head + pattern(offset + n, d)


def raw_literal(dtype, shape, offset, extra=0):
    d = DTYPES[dtype]
    n = SIZES[d]
    for e in shape:
        n *= e
    head = bytes([d, len(shape), 1, 0]) + b''.join(struct.pack('<q', e) for e in shape) + struct.pack('<Q', offset)
    return head + pattern(offset + n + extra, d + 7)


def raw():
    out('raw', 'u1_16.bin', raw_fitted('u1', [], 0, 16))
    out('raw', 'f4_3x4x2_off4.bin', raw_fitted('f4', [3, 4], 4, 2))
    out('raw', 'i2_5x3.bin', raw_fitted('i2', [5], 0, 3))
    out('raw', 'f8_2x2x2x2x2x2x2x2.bin', raw_fitted('f8', [2] * 7, 0, 2))
    out('raw', 'u2_literal_2x3_off8.bin', raw_literal('u2', [2, 3], 8))
    out('raw', 'i8_literal_4_mismatch.bin', raw_literal('i8', [4], 0, extra=3))
    out('raw', 'u4_literal_empty.bin', raw_literal('u4', [0, 7], 2))


# ------------------------------------------------------------------ pnm
def pnm():
    copy('pnm', 'gray', 'chelsea_37x23.ppm')
    copy('pnm', 'gray', 'chelsea_37x23.L.pgm')
    out('pnm', 'gray16_5x4.pgm', b'P5\n5 4\n65535\n' + pattern(5 * 4 * 2, 3))
    out('pnm', 'rgb_maxval1000_3x2.ppm', b'P6\n# a comment\n3 2\n1000\n' + pattern(3 * 2 * 3 * 2, 4))
    out('pnm', 'gray_maxval15_comments.pgm', b'P5 # width next\n4\t# height\n3 15\n' + bytes(i % 16 for i in range(12)))
    out('pnm', 'one_pixel.pgm', b'P5 1 1 255\n\x80')


# ------------------------------------------------------------------ tiff
TIFF_TYPES = {1: 'B', 2: 's', 3: 'H', 4: 'I', 12: 'd'}  # BYTE, ASCII, SHORT, LONG, DOUBLE


def tiff(width, height, bits, fmt, pixels, order='<', tile=None, rows_per_strip=None, deflate=False, extra=()):
    """A one-band TIFF: strips (rows_per_strip) or tiles (tw, th), optionally deflated.
    `pixels` is the sample bytes in `order`, row by row (whole image). extra: (tag, type, values)."""
    bps = bits // 8
    chunks = []
    if tile:
        tw, th = tile
        for ty in range(0, height, th):
            for tx in range(0, width, tw):
                t = bytearray()
                for r in range(th):
                    for c in range(tw):
                        y, x = ty + r, tx + c
                        if y < height and x < width:
                            i = (y * width + x) * bps
                            t += pixels[i:i + bps]
                        else:
                            t += bytes(bps)
                chunks.append(bytes(t))
    else:
        rps = rows_per_strip or height
        row = width * bps
        chunks = [pixels[y * row:min(height, y + rps) * row] for y in range(0, height, rps)]
    if deflate:
        chunks = [zlib.compress(c, 9) for c in chunks]
    data = bytearray()
    offsets = []
    pos = 8
    for c in chunks:
        offsets.append(pos + len(data))
        data += c
        if len(data) % 2:
            data += b'\0'
    tags = [(256, 4, [width]), (257, 4, [height]), (258, 3, [bits]), (259, 3, [8 if deflate else 1]),
            (262, 3, [1]), (277, 3, [1]), (284, 3, [1]), (339, 3, [fmt])]
    if tile:
        tags += [(322, 4, [tile[0]]), (323, 4, [tile[1]]), (324, 4, offsets), (325, 4, [len(c) for c in chunks])]
    else:
        tags += [(273, 4, offsets), (278, 4, [rows_per_strip or height]), (279, 4, [len(c) for c in chunks])]
    tags += list(extra)
    tags.sort(key=lambda t: t[0])
    ifd_pos = 8 + len(data)
    blob = bytearray()  # out-of-line values, after the IFD
    blob_pos = ifd_pos + 2 + 12 * len(tags) + 4
    entries = b''
    for tag, typ, values in tags:
        if typ == 2:
            raw_v = values.encode() + b'\0'
            count = len(raw_v)
        else:
            raw_v = struct.pack(order + TIFF_TYPES[typ] * len(values), *values)
            count = len(values)
        if len(raw_v) <= 4:
            field = raw_v.ljust(4, b'\0')
        else:
            field = struct.pack(order + 'I', blob_pos + len(blob))
            blob += raw_v
            if len(blob) % 2:
                blob += b'\0'
        entries += struct.pack(order + 'HHI', tag, typ, count) + field
    head = (b'II' if order == '<' else b'MM') + struct.pack(order + 'HI', 42, ifd_pos)
    ifd = struct.pack(order + 'H', len(tags)) + entries + struct.pack(order + 'I', 0)
    return head + bytes(data) + ifd + bytes(blob)


GEO = ((33550, 12, [2.0, 2.0, 0.0]), (33922, 12, [0.0, 0.0, 0.0, 500000.0, 4100000.0, 0.0]),
       (34735, 3, [1, 1, 0, 3, 1024, 0, 1, 1, 1025, 0, 1, 1, 3072, 0, 1, 32633]),
       (34737, 2, 'WGS 84 / UTM zone 33N|'))


def tiff_corpus():
    f32 = b''.join(struct.pack('<f', v) for v in [i * 0.5 - 3 for i in range(8 * 6)])
    f32 = f32[:4 * 5] + struct.pack('<f', -9999.0) + f32[4 * 6:]
    out('tiff', 'f32_8x6_geo_nodata.tif', tiff(8, 6, 32, 3, f32, rows_per_strip=2,
                                              extra=GEO + ((42113, 2, '-9999'),)))
    out('tiff', 'u8_5x3.tif', tiff(5, 3, 8, 1, pattern(15, 5)))
    i16 = b''.join(struct.pack('>h', v) for v in range(-17, 18))
    out('tiff', 'i16_7x5_bigendian.tif', tiff(7, 5, 16, 2, i16, order='>'))
    out('tiff', 'u16_9x4_deflate.tif', tiff(9, 4, 16, 1, pattern(72, 6), rows_per_strip=3, deflate=True))
    f64 = b''.join(struct.pack('<d', (i % 37) * 1.25) for i in range(20 * 18))
    out('tiff', 'f64_20x18_tiles16.tif', tiff(20, 18, 64, 3, f64, tile=(16, 16), extra=GEO[:1]))
    out('tiff', 'u32_3x4_tiles_deflate.tif', tiff(3, 4, 32, 1, pattern(48, 7), tile=(16, 16), deflate=True))
    out('tiff', 'i8_1x1.tif', tiff(1, 1, 8, 2, b'\x85'))


# ------------------------------------------------------------------ image
IMAGES = ['1_trns.png', 'apng_mode_16bit.png', 'apng_mode_grayscale_alpha.png', 'apng_mode_palette_alpha.png',
          'broken.png', 'foo3x5x4indexed.png', 'gen_adam7_rgba16.png', 'gen_gray2.png', 'gen_gray4_trns.png',
          'gen_gray_alpha16.png', 'gen_palette1.png', 'hopper_16bit_qtables.jpg', 'hopper__progressive.jpg',
          'hopper__q40.jpg', 'hopper__quarter.png', 'hopper_gray.jpg', 'hopper_orientation_6.jpg', 'i_trns.png',
          'p_16.png', 'palette_color.png', 'palette_gray.png', 'pil_sample_cmyk.jpg']


def image():
    for name in IMAGES:
        copy('image', 'hash', name)
    for name in sorted(os.listdir(os.path.join(DATA, 'png_edge'))):
        if name.endswith('.png'):
            copy('image', 'png_edge', name)


# ------------------------------------------------------------------ index
def index_file(bits, nfields, entries, meta=b''):
    """entries: (id, stamp, codes as nfields * bits/64 ints, label bytes or None)."""
    words = bits // 64
    n = len(entries)
    labels = [e[3] for e in entries]
    label_bytes = sum(len(x) for x in labels if x is not None)
    body = b'ACCELIDX' + struct.pack('<IIIIQQQ', 1, bits, nfields, 64, n, label_bytes, len(meta)) + bytes(16)
    body += b''.join(struct.pack('<Q', e[0]) for e in entries)
    body += b''.join(struct.pack('<Q', e[1]) for e in entries)
    for f in range(nfields):
        for w in range(words):
            body += b''.join(struct.pack('<Q', e[2][f * words + w]) for e in entries)
    body += b''.join(struct.pack('<Q', 0xffffffffffffffff if x is None else len(x)) for x in labels)
    body += b''.join(x for x in labels if x is not None) + meta
    return body + struct.pack('<I', zlib.crc32(body))


def codes(seed, count, flips=0):
    c = [int.from_bytes(pattern(8, seed * 31 + i), 'big') for i in range(count)]
    return [v ^ ((1 << flips) - 1) for v in c]


def index():
    base = codes(1, 1)[0]
    near = [(i + 1, 1000 + i, [base ^ ((1 << (i % 6)) - 1)], ('img/%d.jpg' % i).encode() if i % 3 else None)
            for i in range(6)]
    out('index', 'u64x1_near.idx', index_file(64, 1, near, b'kinds=dhash'))
    out('index', 'u128x2.idx', index_file(128, 2, [(10 + i, i, codes(i + 2, 4), None) for i in range(4)]))
    out('index', 'u256x1.idx', index_file(256, 1, [(7 - i, 0, codes(i + 9, 4, flips=i), b'x' * i) for i in range(3)]))
    out('index', 'u64x8.idx', index_file(64, 8, [(1 << 40 | i, 5, codes(i + 20, 8), b'') for i in range(2)], b'm'))
    out('index', 'empty.idx', index_file(64, 2, [], b'kinds=dhash,ahash'))
    dups = [(100 + i, i, [base ^ (1 << (i % 64)), base ^ (3 << (i % 60))], ('p/%02d' % i).encode())
            for i in range(40)]
    out('index', 'u64x2_40.idx', index_file(64, 2, dups, b'kinds=dhash,ahash'))


def main():
    if os.path.isdir(CORPUS):
        shutil.rmtree(CORPUS)
    npy()
    raw()
    pnm()
    tiff_corpus()
    image()
    index()
    total = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(CORPUS) for f in fs)
    print('corpus: %d bytes' % total)


if __name__ == '__main__':
    main()
