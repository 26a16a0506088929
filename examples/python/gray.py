"""Convert an image (.npy uint8, or binary .ppm/.pgm) to gray with libaccel.

    python3 examples/python/gray.py [INPUT] [OUTPUT.npy]

Without arguments it converts the bundled sample photo and checks the result
against numpy's version of the same arithmetic.
"""
import os
import sys

from samples import SAMPLES, require_numpy

np = require_numpy()
import accel  # noqa: E402


def read_ppm(path):
    """A small binary PPM/PGM reader, enough for the bundled sample."""
    data = open(path, "rb").read()
    fields, pos = [], 0
    while len(fields) < 4:
        while data[pos:pos + 1].isspace():
            pos += 1
        if data[pos:pos + 1] == b"#":
            pos = data.index(b"\n", pos)
            continue
        end = pos
        while not data[end:end + 1].isspace():
            end += 1
        fields.append(data[pos:end])
        pos = end
    magic, w, h = fields[0], int(fields[1]), int(fields[2])
    channels = 3 if magic == b"P6" else 1
    pixels = np.frombuffer(data, dtype=np.uint8, count=w * h * channels, offset=pos + 1)
    return pixels.reshape((h, w, channels)) if channels == 3 else pixels.reshape((h, w))


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(SAMPLES, "astronaut.ppm")
    image = np.load(src) if src.endswith(".npy") else read_ppm(src)
    with accel.Context() as ctx:
        gray = ctx.to_gray(image)
        print("%s: %s -> %s on %s" % (os.path.basename(src), image.shape, gray.shape, ctx.info()["backend"]))
    if len(sys.argv) > 2:
        np.save(sys.argv[2], gray)
    if image.ndim == 3:
        r, g, b = (image[..., i].astype(np.uint32) for i in range(3))
        expect = ((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16).astype(np.uint8)
        assert np.array_equal(gray, expect), "gray differs from the fixed-point formula"
    return 0


if __name__ == "__main__":
    sys.exit(main())
