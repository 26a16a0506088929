"""Write dct_<n>.npy.gz: scipy.fftpack.dct (type II, norm None, along the last
axis) of five rows of length n, the references of tests/test_hash_dct.c.

Rows (tests/test_hash_dct.c builds the same inputs):
  0  128 everywhere (a flat image: most coefficients are exact zeros)
  1  255 * (i % 2) (a checkerboard line)
  2  200 * ((i // 3) % 2) (stripes three wide)
  3  (7 i^2 + 3 i + 11) % 256 (pseudo-random pixels)
  4  ((37 i) % 101) / 7 - 5.5 (non-integer values, as phash's second pass sees)

Run from this directory: python3 make_dct_refs.py
"""
import gzip
import io

import numpy as np
import scipy
import scipy.fftpack

LENGTHS = (3, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 20, 21, 22, 24, 28, 33, 35, 36, 44, 45, 49, 52, 60, 63, 77, 84,
           121, 143, 180, 236, 244)


def rows(n: int) -> np.ndarray:
    """The five input rows of length n."""
    i = np.arange(n)
    return np.stack([np.full(n, 128.0), 255.0 * (i % 2), 200.0 * ((i // 3) % 2),
                     ((7 * i * i + 3 * i + 11) % 256).astype(float), ((37 * i) % 101) / 7.0 - 5.5])


def main() -> None:
    print("scipy", scipy.__version__, "numpy", np.__version__)
    for n in LENGTHS:
        buf = io.BytesIO()
        np.save(buf, scipy.fftpack.dct(rows(n), axis=-1))
        with gzip.GzipFile("dct_%d.npy.gz" % n, "wb", mtime=0) as f:
            f.write(buf.getvalue())


if __name__ == "__main__":
    main()
