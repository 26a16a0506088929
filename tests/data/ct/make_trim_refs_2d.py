"""Reference markers for SNOW's peak trimming of 2-D images, made with PoreSpy.

Writes trim_refs_2d.npz: for case k (porous images of smoothed noise, three
sizes and porosities), edt_k (float32, scipy.ndimage.distance_transform_edt of
the pores), peaks_k (scikit-image's peak_local_max(edt, min_distance=1,
exclude_border=False, labels=<8-connected pore components>), less the peak
groups whose two nearest neighbours are equally near: which of them SciPy's
KD-tree reports depends on how it built the tree), and PoreSpy's
    saddles_k  porespy.filters.trim_saddle_points(peaks, edt)
    nearby_k   porespy.filters.trim_nearby_peaks(peaks, edt)
    both_k     trim_nearby_peaks(trim_saddle_points(peaks, edt), edt)
each labelled 8-connected in C order (int32), as snow_partitioning labels its
peaks. PoreSpy works in 2-D with 2-D rules (a 3 x 3 square, 4- and
8-connected groups).

    python make_trim_refs_2d.py OUT.npz
"""
import sys

import numpy as np
import porespy as ps
import scipy.ndimage as ndi
from make_trim_refs import without_ties  # the same rule, in 2-D
from skimage.feature import peak_local_max

SQUARE = np.ones((3, 3), bool)


def main():
    out = {}
    cases = [((120, 90), 2.0, 0.0, 1), ((64, 200), 3.0, -0.3, 2), ((150, 150), 1.5, 0.2, 3)]
    for k, (shape, sigma, level, seed) in enumerate(cases):
        rng = np.random.default_rng(seed)
        pores = ndi.gaussian_filter(rng.standard_normal(shape), sigma) > level * ndi.gaussian_filter(
            rng.standard_normal(shape), sigma).std()
        dt = ndi.distance_transform_edt(pores).astype(np.float32)
        comps, _ = ndi.label(pores, structure=SQUARE)
        peaks = np.zeros(shape, bool)
        peaks[tuple(peak_local_max(dt, min_distance=1, exclude_border=False, labels=comps).T)] = True
        peaks = without_ties(peaks)
        saddles = ps.filters.trim_saddle_points(peaks=peaks, dt=dt) > 0
        nearby = ps.filters.trim_nearby_peaks(peaks=peaks, dt=dt) > 0
        both = ps.filters.trim_nearby_peaks(peaks=saddles, dt=dt) > 0
        out["edt_%d" % k] = dt
        out["peaks_%d" % k] = peaks.astype(np.uint8)
        for name, p in (("saddles", saddles), ("nearby", nearby), ("both", both)):
            out["%s_%d" % (name, k)] = ndi.label(p, structure=SQUARE)[0].astype(np.int32)
        print(shape, int(peaks.sum()), "peaks;", int(saddles.sum()), "after saddles;", int(nearby.sum()),
              "after nearby;", int(both.sum()), "after both")
    np.savez_compressed(sys.argv[1], **out)
    print("porespy", ps.__version__, "scipy", __import__("scipy").__version__, "numpy", np.__version__)


if __name__ == "__main__":
    main()
