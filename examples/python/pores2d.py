"""Pores of a 2-D section with the calls SciPy and scikit-image users know.

    python3 examples/python/pores2d.py

Makes a section of packed discs (the solid) with a few closed voids, fills
the voids (scipy.ndimage.binary_fill_holes), measures the distance to the
solid with an anisotropic pixel size (distance_transform_edt(sampling=)),
and splits the open space between the discs into basins from one seed per
gap (skimage.segmentation.watershed), with a progress bar on stderr.
"""
import sys

from samples import require_numpy

np = require_numpy()
import accel  # noqa: E402


def section(rows=120, cols=160, seed=5):
    """A bool image: discs of solid, some with a void inside."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[:rows, :cols]
    solid = np.zeros((rows, cols), bool)
    for cy, cx in rng.uniform((0, 0), (rows, cols), size=(14, 2)):
        r = rng.uniform(9, 16)
        d2 = (y - cy) ** 2 + (x - cx) ** 2
        solid |= d2 <= r * r
        if rng.random() < 0.5:
            solid &= ~(d2 <= (r / 3) ** 2)  # a closed void inside the disc
    return solid


def main():
    solid = section()
    with accel.Context() as ctx:
        filled = ctx.ct.fill_holes(solid)                      # voids closed, 2-D 4-connectivity
        voids = int(filled.sum() - solid.sum())
        pore = ~filled
        dist = ctx.ct.edt(pore, sampling=(2.0, 1.0))           # rows 2 um apart, columns 1 um
        # one seed at the deepest point of each 20 x 20 block of open space
        markers = np.zeros(pore.shape, np.int32)
        label = 0
        for r0 in range(0, pore.shape[0], 20):
            for c0 in range(0, pore.shape[1], 20):
                block = dist[r0:r0 + 20, c0:c0 + 20]
                if block.max() > 0:
                    r, c = np.unravel_index(np.argmax(block), block.shape)
                    label += 1
                    markers[r0 + r, c0 + c] = label
        labels = ctx.ct.watershed(-dist, markers, mask=pore, progress=True)
    print("solid pixels %d, closed voids filled %d pixels" % (solid.sum(), voids))
    print("largest distance to the solid %.2f um" % dist.max())
    sizes = np.bincount(labels.ravel(), minlength=label + 1)[1:]
    print("%d basins, largest %s pixels" % (label, sorted(sizes.tolist())[-5:]))
    print("open pixels no seed reaches (pockets without a seed): %d" % ((labels == 0) & pore).sum())
    assert not labels[~pore].any() and sizes.min() >= 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
