"""Pictures: accel ct segment --preview, accel svf --preview (PNGs decoded
here with zlib, checked against the volume, the labels and the grid) and
accel dupes --html (opened in headless Chromium: the DOM has one row per
group and a screenshot shows every group)."""
import gzip
import os
import re
import shutil
import struct
import subprocess
import unittest
import zlib

from common import SRC, CliTest, run

try:
    import numpy as np
except ImportError:
    np = None

CT = os.path.join(SRC, "tests", "data", "ct", "food_aniso_64x96x80_s1")
SVF = os.path.join(SRC, "tests", "data", "svf", "city_96x128_2m")
PHOTOS = os.path.join(SRC, "samples", "photos")


def png_decode(path):
    """(width, height, rows of RGB tuples) of an 8-bit RGB or RGBA PNG, not interlaced."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    at, idat, w = 8, b"", None
    while at < len(data):
        n, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        at += 12 + n
    raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(w)])
        prev = line
    return w, h, rows


def load_gz(path):
    with gzip.open(path) as f:
        return np.load(f)


@unittest.skipIf(np is None, "numpy is not installed")
class Previews(CliTest):
    prefix = "accel-pic-"

    def test_ct_preview(self):
        vol = load_gz(os.path.join(CT, "input.npy.gz"))
        src = os.path.join(self.tmp, "v.npy")
        np.save(src, vol)
        png, labels = os.path.join(self.tmp, "p.png"), os.path.join(self.tmp, "l.npy")
        r = run("ct", "segment", src, "--threshold", "-300", "--spacing", "2,0.5,0.5", "--pores", "all",
                "--out-labels", labels, "--preview", png)
        self.assertEqual(r.returncode, 0, r.stderr)
        Z, Y, X = vol.shape
        s = max(1, 256 // max(vol.shape))
        w, h, px = png_decode(png)
        self.assertEqual((w, h), (s * (2 * X + Y) + 16, s * max(Y, Z)))
        lab = np.load(labels)
        lo, hi = float(vol.min()), float(vol.max())
        planes = [(0, vol[Z // 2], lab[Z // 2]), (s * X + 8, vol[:, Y // 2], lab[:, Y // 2]),
                  (2 * (s * X + 8), vol[:, :, X // 2], lab[:, :, X // 2])]
        for x0, gray, lb in planes:
            for r_ in range(0, gray.shape[0], 7):
                for c in range(0, gray.shape[1], 5):
                    g = int(255 * (float(gray[r_, c]) - lo) / (hi - lo) + 0.5)
                    p = px[r_ * s + s // 2][x0 + c * s + s // 2]
                    if lb[r_, c] == 0:
                        self.assertEqual(p, (g, g, g), (x0, r_, c))
                    else:   # half the gray, half a label colour: never gray where the colour is not
                        self.assertTrue(all(abs(2 * v - g) <= 256 for v in p), (p, g))
        self.assertGreater(sum(1 for row in px for p in row if len(set(p)) > 1), 0)   # labels are drawn
        self.assertEqual(px[h - 1][s * X + 4], (255, 255, 255))                       # the gap is white

    def test_svf_preview(self):
        dsm = load_gz(os.path.join(SVF, "dsm.npy.gz")).astype(np.float32)
        src = os.path.join(self.tmp, "dsm.npy")
        np.save(src, dsm)
        png, out = os.path.join(self.tmp, "s.png"), os.path.join(self.tmp, "o")
        r = run("svf", "--dsm", src, "--pixel-size", "2", "--patches", "145", "--out", out, "--preview", png)
        self.assertEqual(r.returncode, 0, r.stderr)
        grid = np.load(os.path.join(out, "svf_svf.npy"))
        rows, cols = grid.shape
        s = max(1, 256 // max(rows, cols))
        w, h, px = png_decode(png)
        self.assertEqual((w, h), (s * cols + 64, max(s * rows, 128)))
        # the legend's bar (x = s * cols + 8 .. + 14; 1 at y = 16, 0 at y = h - 9) reads the grid's colours back
        bar = [(1 - (y - 16) / (h - 25), px[y][s * cols + 12]) for y in range(16, h - 8)]
        for r_ in range(0, rows, 9):
            for c in range(0, cols, 11):
                p = px[r_ * s][c * s]
                value = min(bar, key=lambda b: sum((u - v) ** 2 for u, v in zip(b[1], p)))[0]
                self.assertAlmostEqual(value, float(np.clip(grid[r_, c], 0, 1)), delta=0.03)
        self.assertEqual(len({px[y][s * cols + 12] for y in range(16, h - 8)}) > 50, True)   # a colour ramp


class DupesReport(CliTest):
    prefix = "accel-html-"

    def test_report_in_chromium(self):
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        html = os.path.join(self.tmp, "report.html")
        r = run("dupes", PHOTOS, "--html", html)
        self.assertEqual(r.returncode, 0, r.stderr)
        groups = len({l.split("\t")[0] for l in r.stdout.splitlines()[1:]})
        self.assertGreaterEqual(groups, 2)
        with open(html, encoding="utf-8") as f:
            page = f.read()
        self.assertEqual(page.count('<div class="group"'), groups)
        self.assertEqual(page.count("data:image/png;base64,"), len(r.stdout.splitlines()) - 1)
        r = run("dupes", PHOTOS, "--html", os.path.join(self.tmp, "r.txt"))
        self.assertEqual(r.returncode, 2)
        if not chromium:
            self.skipTest("chromium is not installed (Debian package chromium)")
        flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
                 "--disable-extensions", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--user-data-dir=" + os.path.join(self.tmp, "profile")]
        dom = subprocess.run(flags + ["--dump-dom", "file://" + html], capture_output=True, text=True, timeout=60)
        self.assertEqual(dom.returncode, 0, dom.stderr[-2000:])
        self.assertEqual(len(re.findall(r'<div class="group"', dom.stdout)), groups)
        self.assertEqual(len(re.findall(r'<img src="data:image/png', dom.stdout)), page.count("<img "))
        shot = os.path.join(self.tmp, "shot.png")
        height = 120 + 260 * groups
        r = subprocess.run(flags + ["--window-size=1000,%d" % height, "--screenshot=" + shot, "file://" + html],
                           capture_output=True, text=True, timeout=60)
        self.assertTrue(os.path.exists(shot), r.stderr[-2000:])
        w, h, px = png_decode(shot)
        self.assertEqual((w, h), (1000, height))
        # each group is a block of its background colour down the left edge (x = 20), with pictures in it
        blocks, inside = [], False
        for y in range(h):
            bg = all(abs(u - v) <= 2 for u, v in zip(px[y][20], (0xE8, 0xEC, 0xF6)))
            if bg and not inside:
                blocks.append([y, y])
            if bg:
                blocks[-1][1] = y
            inside = bg
        self.assertEqual(len(blocks), groups, blocks)
        for y0, y1 in blocks:
            colours = {px[y][x] for y in range(y0, y1, 3) for x in range(28, 600, 3)}
            self.assertGreater(len(colours), 200, (y0, y1))   # thumbnails, not an empty box


if __name__ == "__main__":
    unittest.main(verbosity=2)
