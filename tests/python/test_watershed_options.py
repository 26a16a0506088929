"""The watershed's scikit-image options (connectivity, watershed_line,
compactness, markers as a count or None, float64 images): against labels
scikit-image 0.19.3 itself computed (tests/data/ct/watershed_refs.npz, made
by make_watershed_refs.py there: 0.19.3 has no wheel for this Python and
numpy, and later releases flood differently, 0.25 raising a neighbour's
priority to its parent's and testing the line against the voxel's own
label), against a reference flood written here from 0.19.3's algorithm, and
against scikit-image's documented examples."""

import heapq
import itertools
import os
import sys
import unittest

from support import require

np = require("numpy")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import accel  # noqa: E402
from accel import _seeds  # noqa: E402

# scikit-image's neighbour order: the footprint's offsets sorted by distance
# with numpy 1.x's argsort (an introsort, not stable past 16 entries).
ORDER = {
    (1, 1): [(-1,), (1,)],
    (2, 1): [(-1, 0), (0, -1), (0, 1), (1, 0)],
    (2, 2): [(-1, 0), (0, -1), (0, 1), (1, 0), (-1, -1), (-1, 1), (1, -1), (1, 1)],
    (3, 1): [(-1, 0, 0), (0, -1, 0), (0, 0, -1), (0, 0, 1), (0, 1, 0), (1, 0, 0)],
    (3, 2): [(1, 0, 0), (-1, 0, 0), (0, -1, 0), (0, 1, 0), (0, 0, -1), (0, 0, 1), (1, 0, -1), (1, -1, 0), (0, 1, 1),
             (0, 1, -1), (-1, -1, 0), (0, -1, 1), (0, -1, -1), (-1, 1, 0), (-1, 0, 1), (-1, 0, -1), (1, 0, 1),
             (1, 1, 0)],
    (3, 3): [(0, 1, 0), (-1, 0, 0), (0, 0, 1), (0, 0, -1), (1, 0, 0), (0, -1, 0), (0, 1, 1), (0, 1, -1), (1, 1, 0),
             (0, -1, 1), (0, -1, -1), (-1, 1, 0), (1, 0, 1), (-1, 0, 1), (-1, 0, -1), (-1, -1, 0), (1, 0, -1),
             (1, -1, 0), (1, 1, -1), (-1, -1, -1), (1, -1, -1), (-1, 1, 1), (-1, 1, -1), (-1, -1, 1), (1, -1, 1),
             (1, 1, 1)],
}


def reference(image, markers, mask=None, connectivity=1, compactness=0.0, wsl=False):
    """scikit-image 0.19.3's flood over (value, age) keys; marker values must
    be distinct (heapq and scikit-image's heap then pop in the same order)."""
    image = np.asarray(image, np.float64)
    shape = image.shape
    mask = np.ones(shape, bool) if mask is None else np.asarray(mask) != 0
    out = np.where(mask, np.asarray(markers, np.int32), 0)
    live = mask.copy()
    offs = ORDER[(image.ndim, min(connectivity, image.ndim))]

    def nbrs(p):
        for o in offs:
            q = tuple(a + b for a, b in zip(p, o))
            if all(0 <= c < n for c, n in zip(q, shape)):
                yield q
    heap = [(image[tuple(p)], 0, tuple(p), tuple(p)) for p in np.argwhere(out != 0)]
    heapq.heapify(heap)
    age, late = 1, compactness > 0 or wsl
    while heap:
        _, _, p, src = heapq.heappop(heap)
        if late:
            if out[p] and p != src:
                continue
            if wsl:
                if not live[p]:
                    continue
                labels = {out[q] for q in nbrs(p) if live[q] and out[q]}
                if len(labels) > 1:
                    live[p] = False
                    continue
            out[p] = out[src]
        for q in nbrs(p):
            if not live[q] or out[q]:
                continue
            age += 1
            v = image[q]
            if compactness > 0:
                v += compactness * np.sqrt(float(sum((a - b) ** 2 for a, b in zip(q, src))))
            elif not wsl:
                out[q] = out[p]
            heapq.heappush(heap, (v, age, q, src))
    return out


def _ravel_order(shape, offsets):
    """scikit-image's _offsets_to_raveled_neighbors for an unpadded shape
    smaller than the footprint: raveled offsets, first occurrences kept."""
    strides = np.cumprod((shape[1:] + (1,))[::-1])[::-1]
    seen = []
    for o in offsets:
        r = int(np.dot(o, strides))
        if r != 0 and r not in seen:
            seen.append(r)
    return seen


class WatershedOptions(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ctx = accel.Context()
        cls.rng = np.random.default_rng(1234)

    @classmethod
    def tearDownClass(cls):
        cls.ctx.close()

    def test_order_table_matches_the_documented_example(self):
        # skimage.morphology._util._offsets_to_raveled_neighbors((2, 3, 2), np.ones((3, 3, 3)), (1, 1, 1))
        documented = [2, -6, 1, -1, 6, -2, 3, 8, -3, -4, 7, -5, -7, -8, 5, 4, -9, 9]
        self.assertEqual(_ravel_order((2, 3, 2), [(0, 0, 0)] + ORDER[(3, 3)]), documented)
        for (nd, c), offs in ORDER.items():
            want = {o for o in itertools.product((-1, 0, 1), repeat=nd) if 0 < sum(map(bool, o)) <= c}
            self.assertEqual(set(offs), want)
            self.assertEqual(len(offs), len(want))

    def _random_case(self, shape, nmarkers):
        image = self.rng.permutation(int(np.prod(shape))).reshape(shape) / 7.0 - 3.0
        markers = np.zeros(shape, np.int32)
        for label, p in enumerate(self.rng.choice(markers.size, nmarkers, replace=False), 1):
            markers.flat[p] = label
        return image, markers, self.rng.random(shape) > 0.15

    def test_against_the_reference(self):
        cases = 0
        for shape in ((40,), (13, 17), (6, 7, 8)):
            for conn in range(1, len(shape) + 1):
                for opts in ({}, {"watershed_line": True}, {"compactness": 0.05}, {"compactness": 2.0},
                             {"compactness": 0.3, "watershed_line": True}):
                    image, markers, mask = self._random_case(shape, 5)
                    for m in (None, mask):
                        got = self.ctx.ct.watershed(image, markers, mask=m, connectivity=conn, **opts)
                        want = reference(image, markers, m, conn, opts.get("compactness", 0.0),
                                         opts.get("watershed_line", False))
                        np.testing.assert_array_equal(got, want, err_msg="%s conn %d %s mask %s" % (
                            shape, conn, opts, m is not None))
                        cases += 1
                        # float32 images flood as their float64 values
                        got32 = self.ctx.ct.watershed(image.astype(np.float32), markers, mask=m,
                                                      connectivity=conn, **opts)
                        want32 = reference(image.astype(np.float32), markers, m, conn,
                                           opts.get("compactness", 0.0), opts.get("watershed_line", False))
                        np.testing.assert_array_equal(got32, want32)
        self.assertEqual(cases, 60)

    def test_float64_kept(self):
        # values a float32 cast would merge: the float64 flood tells them apart
        image = np.array([0.0, 1.0 + 2e-9, 1.0 + 1e-9, 1.0 + 1e-9, 1.0 + 2e-9, 0.0])
        markers = np.array([1, 0, 0, 0, 0, 2])
        np.testing.assert_array_equal(self.ctx.ct.watershed(image, markers), reference(image, markers))
        # in float64 the lower middle pair floods from marker 1's side first; cast to float32 the four
        # middle values tie and split by age
        np.testing.assert_array_equal(self.ctx.ct.watershed(image, markers), [1, 1, 1, 1, 2, 2])
        np.testing.assert_array_equal(self.ctx.ct.watershed(image.astype(np.float32), markers), [1, 1, 1, 2, 2, 2])

    def test_watershed_line_by_hand(self):
        # two markers on a ramp down to the middle: the pixel both basins reach is the line
        image = np.array([[0, 1, 2, 3, 2, 1, 0]], float)
        markers = np.array([[1, 0, 0, 0, 0, 0, 2]])
        np.testing.assert_array_equal(self.ctx.ct.watershed(image, markers, watershed_line=True),
                                      [[1, 1, 1, 0, 2, 2, 2]])
        # 8-connected: a diagonal line between two corners
        image = np.zeros((3, 3))
        markers = np.zeros((3, 3), int)
        markers[0, 2], markers[2, 0] = 1, 2
        got = self.ctx.ct.watershed(image, markers, connectivity=2, watershed_line=True)
        np.testing.assert_array_equal(got, reference(image.astype(float) + np.arange(9).reshape(3, 3) * 0,
                                                     markers, None, 2, 0.0, True))

    def test_compactness_splits_a_plateau_by_distance(self):
        image = np.zeros((1, 9))
        markers = np.zeros((1, 9), int)
        markers[0, 0], markers[0, 6] = 1, 2
        # plain flood: first pushed, first popped, so marker 1 (pushed first) takes more on a flat row;
        # compact: each voxel to its nearest marker
        got = self.ctx.ct.watershed(image, markers, compactness=1.0)
        np.testing.assert_array_equal(got, [[1, 1, 1, 1, 2, 2, 2, 2, 2]])

    def test_markers_none_are_local_minima(self):
        for shape in ((30,), (9, 11), (5, 6, 7)):
            for conn in range(1, len(shape) + 1):
                image = self.rng.integers(0, 6, shape).astype(np.float64)
                mk = _seeds.local_minima_markers(image, None, conn)
                self.assertEqual(mk.max(), len(np.unique(mk)) - 1)
                np.testing.assert_array_equal(mk != 0, brute_minima(image, conn), err_msg="%s %d" % (shape, conn))
                # numbered by group in C order
                firsts = [np.flatnonzero(mk.ravel() == k)[0] for k in range(1, mk.max() + 1)]
                self.assertEqual(firsts, sorted(firsts))
                got = self.ctx.ct.watershed(image + self.rng.random(shape) * 1e-3, None, connectivity=conn)
                self.assertTrue((got > 0).all())
        # a flat image has no minimum (its one plateau touches the border at the padding's value)
        np.testing.assert_array_equal(self.ctx.ct.watershed(np.ones((4, 4))), np.zeros((4, 4)))
        # documented: markers None floods from the minima, like the labelled minima given as markers
        image = np.array([[3, 2, 3, 3, 1], [3, 3, 3, 2, 3], [0, 3, 3, 3, 3]], float)
        mk = _seeds.local_minima_markers(image, None, 1)
        np.testing.assert_array_equal(mk, [[0, 1, 0, 0, 2], [0, 0, 0, 3, 0], [4, 0, 0, 0, 0]])
        np.testing.assert_array_equal(self.ctx.ct.watershed(image), self.ctx.ct.watershed(image, mk))

    def test_markers_count_is_a_regular_grid(self):
        # skimage.util.regular_grid's and regular_seeds' documented examples
        self.assertEqual(_seeds._regular_slices((20, 40), 8), (slice(5, None, 10), slice(5, None, 10)))
        self.assertEqual(_seeds._regular_slices((20, 40), 32), (slice(2, None, 5), slice(2, None, 5)))
        self.assertEqual(_seeds._regular_slices((3, 20, 40), 8),
                         (slice(1, None, 3), slice(5, None, 10), slice(5, None, 10)))
        np.testing.assert_array_equal(_seeds.grid_markers((5, 5), 4, None),
                                      [[0, 0, 0, 0, 0], [0, 1, 0, 2, 0], [0, 0, 0, 0, 0], [0, 3, 0, 4, 0],
                                       [0, 0, 0, 0, 0]])
        image = self.rng.random((5, 5))
        np.testing.assert_array_equal(self.ctx.ct.watershed(image, 4),
                                      self.ctx.ct.watershed(image, _seeds.grid_markers((5, 5), 4, None)))
        # with a mask the count is scaled by the share inside it: 4 / (10 / 25) = 10 points
        mask = np.zeros((5, 5), bool)
        mask[:2] = True
        np.testing.assert_array_equal(_seeds.grid_markers((5, 5), 4, mask),
                                      _seeds.grid_markers((5, 5), 10, None) * mask)
        with self.assertRaises(ValueError):
            self.ctx.ct.watershed(image, 0)

    def test_errors(self):
        image, markers = np.zeros((4, 4)), np.eye(4, dtype=np.int32)
        with self.assertRaisesRegex(ValueError, "connectivity must be >= 1"):
            self.ctx.ct.watershed(image, markers, connectivity=0)
        with self.assertRaisesRegex(ValueError, "compactness"):
            self.ctx.ct.watershed(image, markers, compactness=-1.0)
        with self.assertRaisesRegex(ValueError, "compactness"):
            self.ctx.ct.watershed(image, markers, compactness=float("inf"))
        with self.assertRaises(NotImplementedError):  # footprints other than generate_binary_structure's
            self.ctx.ct.watershed(image, markers, connectivity=np.eye(3, dtype=bool))
        with self.assertRaisesRegex(ValueError, "shape"):
            self.ctx.ct.watershed(image, markers[:3])


REFS = os.path.join(os.path.dirname(__file__), "..", "data", "ct", "watershed_refs.npz")


@unittest.skipUnless(os.path.exists(REFS), "tests/data/ct/watershed_refs.npz is absent")
class AgainstScikitImage0193(unittest.TestCase):
    """Labels that scikit-image 0.19.3 computed (tests/data/ct/make_watershed_refs.py)."""

    def test_every_case(self):
        import gzip
        refs = np.load(REFS)
        with gzip.open(os.path.join(os.path.dirname(REFS), "berea_pore", "edt.npy.gz"), "rb") as f:
            edt = np.load(f)[:32, :32, :32]
        count, at = int(refs["count"]), 0
        all_refs, all_args, all_labels = refs["refs"], refs["args"], refs["labels"]
        self.assertGreater(count, 200)
        with accel.Context() as ctx:
            for k in range(count):
                im_n, mk_n, mask_n, count_n = (int(v) for v in all_refs[k])
                image = refs["array_%d" % im_n] if im_n >= 0 else -edt
                markers = refs["array_%d" % mk_n] if mk_n >= 0 else (count_n or None)
                mask = refs["array_%d" % mask_n] if mask_n >= 0 else None
                conn, wsl, compactness = all_args[k]
                want = all_labels[at:at + image.size].reshape(image.shape)
                at += image.size
                got = ctx.ct.watershed(image, markers, mask=mask, connectivity=int(conn), watershed_line=bool(wsl),
                                       compactness=float(compactness))
                np.testing.assert_array_equal(got, want, err_msg="case %d: %s, markers %s, "
                                              "conn %d, line %d, compactness %g, mask %s" % (
                                                  k, image.shape, "array" if isinstance(markers, np.ndarray)
                                                  else markers, conn, wsl, compactness, mask is not None))
        self.assertEqual(at, all_labels.size)


def brute_minima(image, conn):
    """Plateaus (equal values, connected) with no strictly lower neighbour, by
    a breadth-first search per plateau; none for a flat image."""
    shape = image.shape
    offs = [o for o in itertools.product((-1, 0, 1), repeat=image.ndim) if 0 < sum(map(bool, o)) <= conn]
    seen = np.zeros(shape, bool)
    out = np.zeros(shape, bool)
    if np.all(image == image.flat[0]):
        return out
    for start in itertools.product(*map(range, shape)):
        if seen[start]:
            continue
        group, todo, lowest = [start], [start], True
        seen[start] = True
        while todo:
            p = todo.pop()
            for o in offs:
                q = tuple(a + b for a, b in zip(p, o))
                if not all(0 <= c < n for c, n in zip(q, shape)):
                    continue
                if image[q] < image[p]:
                    lowest = False
                elif image[q] == image[p] and not seen[q]:
                    seen[q] = True
                    group.append(q)
                    todo.append(q)
        if lowest:
            for p in group:
                out[p] = True
    return out


if __name__ == "__main__":
    unittest.main()
