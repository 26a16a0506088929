"""accel.dask on a dask.distributed LocalCluster of two worker processes: shadows
and sky view factors of the committed city cut into chunks equal the
single-process grids bit for bit (and differ when the halo is left out), and
a catalog hashed as a dask.bag equals imagehash's hashes and the
single-process index's groups."""
import doctest
import gzip
import io
import os
import unittest

from support import HASHDATA, SRC, clean_environment, hash_reference_rows, require

np = require("numpy")
require("dask.array")
require("dask.bag")
distributed = require("distributed")
import dask.array as da  # noqa: E402

import accel  # noqa: E402
import accel.dask as adask  # noqa: E402

clean_environment()

CITY = os.path.join(SRC, "tests", "data", "svf", "city_96x128_2m")


def load(name):
    with gzip.open(os.path.join(CITY, name + ".npy.gz")) as f:
        return np.load(io.BytesIO(f.read()))


def assert_grids_equal(test, got, ref, what):
    for k, v in got.items():
        np.testing.assert_array_equal(v, ref[k], err_msg="%s: %s" % (what, k))
        test.assertEqual(v.dtype, np.float32)


class OnACluster(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # two worker processes of one thread each; the library's contexts are made in them
        cls.cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                               dashboard_address=None)
        cls.client = distributed.Client(cls.cluster)
        cls.ctx = accel.Context(backend="cpu")
        cls.dsm, cls.cdsm, cls.tdsm = load("dsm"), load("cdsm"), load("tdsm")

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.cluster.close()
        cls.ctx.close()

    def chunked(self, a, chunks=(48, 64)):
        return da.from_array(a, chunks=chunks)

    def computed(self, grids):
        """The grids, computed on the cluster's workers (each chunk a task there)."""
        out = self.client.compute(grids).result()
        # the contexts were made in the worker processes, none in this one
        made = self.client.run(lambda: len(adask._contexts))
        self.assertEqual(len(made), 2)
        self.assertGreaterEqual(sum(made.values()), 1)
        self.assertEqual(adask._contexts, {})
        return out

    def test_sky_view_factors_equal_one_process(self):
        # 20 m pixels: a halo of ~20 pixels, smaller than the 48 x 64 chunks
        ref = self.ctx.svf.sky(self.dsm, 20.0, self.cdsm, self.tdsm)
        lazy = adask.sky(self.chunked(self.dsm), 20.0, self.chunked(self.cdsm), self.chunked(self.tdsm),
                         backend="cpu", threads=1)
        self.assertEqual(sorted(lazy), sorted(accel.SVF_GRIDS))
        self.assertEqual(lazy["svf"].chunks, ((48, 48), (64, 64)))  # cut into four chunks indeed
        got = self.computed(lazy)
        assert_grids_equal(self, got, ref, "sky")
        # without the halo the chunks differ: the test can fail
        cut = da.map_blocks(lambda d, c, t: self.ctx_sky(d, c, t), self.chunked(self.dsm), self.chunked(self.cdsm),
                            self.chunked(self.tdsm), dtype=np.float32).compute(scheduler="sync")
        self.assertGreater(int((cut != ref["svf"]).sum()), 0)

    def ctx_sky(self, d, c, t):
        return self.ctx.svf.sky(d, 20.0, c, t, max_height=float(max(self.dsm.max(), self.cdsm.max())))["svf"]

    def test_shadows_equal_one_process(self):
        for (az, alt, pixel, chunks) in ((247.5, 12, 20.0, (48, 64)), (90, 30, 2.0, (32, 32)),
                                         (180, 60, 2.0, (24, 40))):
            ref = self.ctx.svf.shadows(self.dsm, az, alt, pixel, self.cdsm, self.tdsm)
            lazy = adask.shadows(self.chunked(self.dsm, chunks), az, alt, pixel, self.chunked(self.cdsm, chunks),
                                 backend="cpu", threads=1, tdsm=self.chunked(self.tdsm, chunks))
            assert_grids_equal(self, self.computed(lazy), ref, "shadows %g/%g" % (az, alt))
        # the UMEP reference at 2 m, through Dask too
        got = self.computed(adask.shadows(self.chunked(self.dsm), 90, 30, 2.0, self.cdsm, self.tdsm, backend="cpu"))
        np.testing.assert_array_equal(got["sh"], load("shadow_az90_alt30_sh"))

    def test_buildings_only_numpy_input_and_a_negative_dsm(self):
        low = self.dsm - np.float32(25)  # below 0: raised by |min| before it is cut
        raised = (low - low.min()).astype(np.float32)
        ref = self.ctx.svf.sky(raised, 20.0, patches=145)
        got = self.computed(adask.sky(self.chunked(low), 20.0, patches=145, backend="cpu"))
        self.assertEqual(sorted(got), sorted(accel.SVF_GRIDS[:5]))
        assert_grids_equal(self, got, ref, "negative dsm")
        # a numpy DSM is accepted as is
        ref = self.ctx.svf.shadows(self.dsm, 120, 25, 4.0)
        assert_grids_equal(self, self.computed(adask.shadows(self.dsm, 120, 25, 4.0, backend="cpu")), ref, "numpy")

    def test_bad_surfaces_are_refused(self):
        bad = self.dsm.copy()
        bad[3, 4] = np.inf
        with self.assertRaises(ValueError):
            adask.sky(self.chunked(bad), 2.0)
        with self.assertRaises(ValueError):
            adask.sky(self.chunked(self.dsm), 2.0, tdsm=self.chunked(self.tdsm))
        with self.assertRaises(ValueError):
            adask.shadows(self.chunked(self.dsm), 90, 30, 2.0, cdsm=self.cdsm[:10])
        with self.assertRaises(accel.AccelError):
            adask.shadows(self.chunked(self.dsm), 90, 95, 2.0)  # the library's own check of the altitude

    def test_a_catalog_hashed_on_the_cluster_feeds_the_index(self):
        rows = hash_reference_rows()
        names = sorted(rows)
        paths = [os.path.join(HASHDATA, n) for n in names]
        records = adask.hash_bag(paths, kinds=("dhash", "ahash"), partition_size=7, backend="cpu").compute()
        self.assertEqual([r["path"] for r in records], paths)
        for n, r in zip(names, records):
            if rows[n]["dhash8"] == "error":
                self.assertIsNotNone(r["error"], n)
                self.assertTrue(r["message"], n)
            else:
                self.assertEqual((r["dhash"], r["ahash"]), (rows[n]["dhash8"], rows[n]["ahash8"]), n)
        index, failures = adask.index_files(self.ctx, paths, kinds=("dhash", "ahash"), partition_size=7,
                                            backend="cpu")
        self.assertEqual(sorted(failures), sorted(p for n, p in zip(names, paths) if rows[n]["dhash8"] == "error"))
        # the single-process route: one batch, one index
        h = self.ctx.hash.files(paths, kinds=("dhash", "ahash"))
        ok = [i for i in range(len(paths)) if h.ok(i)]
        one = accel.Index(self.ctx, nfields=2)
        one.add(np.asarray(ok, np.uint64), np.stack([h.u64("dhash")[ok], h.u64("ahash")[ok]], axis=1))
        self.assertEqual(len(index), len(one))
        for t in (0, 6, 12):
            got, want = index.groups(thresholds=t), one.groups(thresholds=t)
            self.assertEqual([list(g) for g in got], [list(g) for g in want], t)
        self.assertTrue(index.groups(thresholds=12))
        with self.assertRaises(TypeError):
            adask.hash_bag(paths[0])  # one path is not a list of its characters
        # 256-bit phash (size 16) and 42-bit colorhash fields: the codes are imagehash's bits, first bit first
        index, _ = adask.index_files(self.ctx, paths, kinds=("phash", "colorhash"), size=16, binbits=3,
                                     backend="cpu")
        self.assertEqual((index.bits, index.nfields), (256, 2))
        ids, codes, labels, _ = index.entries()
        for i, c, label in zip(ids, codes, labels):
            n = names[int(i)]
            self.assertEqual(label, paths[int(i)])
            words = [int(w) for w in c[0]]
            self.assertEqual("%064x" % sum(w << (64 * (3 - k)) for k, w in enumerate(words)), rows[n]["phash16"], n)
            self.assertEqual(int(c[1][0]) >> (64 - 42), int(rows[n]["colorhash8"], 16), n)
            self.assertEqual([int(w) for w in c[1][1:]], [0, 0, 0], n)

    def test_examples_run(self):
        # the module's numpydoc examples, on the cluster (the client is Dask's default scheduler here)
        result = doctest.testmod(adask, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        self.assertEqual(result.failed, 0)
        self.assertGreaterEqual(result.attempted, 6)


if __name__ == "__main__":
    unittest.main(verbosity=2)
