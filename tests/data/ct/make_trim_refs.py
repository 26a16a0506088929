"""Reference markers for SNOW's peak trimming, made with PoreSpy.

For each fixture folder given (a folder of ../shared/data/ct or tests/data/ct),
the peaks are the reference markers (markers.npy > 0) and the distance map is
the reference edt.npy; this writes
    trim_saddles.npy  porespy.filters.trim_saddle_points(peaks, dt)
    trim_nearby.npy   porespy.filters.trim_nearby_peaks(peaks, dt)
    trim_both.npy     trim_nearby_peaks(trim_saddle_points(peaks, dt), dt)
and the same three for a denser peak set with touching peaks, peaks_md1.npy
(scikit-image's peak_local_max(dt, min_distance=1, exclude_border=False,
labels=<26-connected pore components>) as a 0/1 int32 volume, less the peak
groups whose two nearest neighbours are equally near: which of them SciPy's
KD-tree reports depends on how it built the tree), named trim_*_md1.npy;
each labelled 26-connected in C order (int32), as snow_partitioning labels its
peaks. Only for isotropic spacing (PoreSpy works in voxel units).

    python make_trim_refs.py OUT_DIR FIXTURE_DIR...
"""
import gzip
import os
import sys

import numpy as np
import scipy.ndimage as ndi
import porespy as ps
from skimage.feature import peak_local_max


def load(folder, name):
    path = os.path.join(folder, name)
    if os.path.exists(path):
        return np.load(path)
    with gzip.open(path + ".gz", "rb") as f:
        return np.load(f)


def label26(peaks):
    lab, _ = ndi.label(peaks, structure=np.ones((3, 3, 3), bool))
    return lab.astype(np.int32)


def without_ties(peaks):
    """Drop peak groups (fully connected) with equally near nearest neighbours until none remain."""
    import scipy.spatial as sptl
    peaks = peaks.copy()
    while True:
        lab, n = ndi.label(peaks, structure=np.ones((3,) * peaks.ndim, bool))
        if n < 3:
            return peaks
        crds = np.vstack(ndi.center_of_mass(peaks, labels=lab, index=np.arange(1, n + 1))).astype(int)
        dist, _ = sptl.KDTree(crds).query(crds, k=3)
        tied = np.where(dist[:, 1] == dist[:, 2])[0]
        if len(tied) == 0:
            return peaks
        peaks[lab == tied[0] + 1] = False


def main():
    out_root = sys.argv[1]
    for folder in sys.argv[2:]:
        name = os.path.basename(os.path.normpath(folder))
        dt = load(folder, "edt.npy")
        pores = load(folder, "pores.npy") > 0
        comps, _ = ndi.label(pores, structure=np.ones((3, 3, 3), bool))
        dense = np.zeros(dt.shape, bool)
        dense[tuple(peak_local_max(dt, min_distance=1, exclude_border=False, labels=comps).T)] = True
        dense = without_ties(dense)
        out = os.path.join(out_root, name)
        os.makedirs(out, exist_ok=True)
        np.save(os.path.join(out, "peaks_md1.npy"), dense.astype(np.int32))
        for suffix, peaks in (("", load(folder, "markers.npy") > 0), ("_md1", dense)):
            saddles = ps.filters.trim_saddle_points(peaks=peaks, dt=dt) > 0
            nearby = ps.filters.trim_nearby_peaks(peaks=peaks, dt=dt) > 0
            both = ps.filters.trim_nearby_peaks(peaks=saddles, dt=dt) > 0
            for kind, p in (("saddles", saddles), ("nearby", nearby), ("both", both)):
                np.save(os.path.join(out, "trim_%s%s.npy" % (kind, suffix)), label26(p))
            print(name + suffix, int(peaks.sum()), "peaks;", int(saddles.sum()), "after saddles;",
                  int(nearby.sum()), "after nearby;", int(both.sum()), "after both")
    print("porespy", ps.__version__, "scipy", __import__("scipy").__version__, "numpy", np.__version__)


if __name__ == "__main__":
    main()
