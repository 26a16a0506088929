"""The Python package over the built shared library: version, contexts, the
log callback, errors, statistics, gray conversion and hashing on numpy arrays,
and the Hamming index against a numpy brute force."""
import os
import unittest

from support import HASHDATA, clean_environment, hash_reference_rows as reference, require

np = require("numpy")
import accel  # noqa: E402

clean_environment()


def pillow_luma(rgb):
    """Pillow's convert('L') written with numpy: weights 0.299/0.587/0.114 in 16-bit fixed point."""
    w = [int(c * 65536 + 0.5) for c in (0.299, 0.587, 0.114)]
    r, g, b = (rgb[..., i].astype(np.uint32) for i in range(3))
    return ((r * w[0] + g * w[1] + b * w[2] + 32768) >> 16).astype(np.uint8)


class Bindings(unittest.TestCase):
    def test_version_matches_header(self):
        src = os.environ["ACCEL_SOURCE_ROOT"]
        with open(os.path.join(src, "include", "accel", "core.h")) as f:
            header = f.read()
        want = header.split('#define ACCEL_VERSION_STRING "')[1].split('"')[0]
        self.assertEqual(accel.version(), want)
        self.assertIn("cuda=", accel.build_info())

    def test_context_and_log_callback(self):
        lines = []
        with accel.Context(backend="cpu", threads=2, log=lambda lvl, msg: lines.append((lvl, msg)),
                           log_level="debug") as ctx:
            info = ctx.info()
            self.assertEqual(info["backend"], "cpu")
            self.assertEqual(info["cpu_threads"], 2)
            self.assertEqual(info["log_level"], "debug")
        self.assertTrue(any(lvl == "debug" and "context ready" in msg for lvl, msg in lines), lines)
        for sync in ("index", "all", "none"):
            with accel.Context(backend="cpu", sync=sync) as ctx:
                self.assertIn("sync='%s'" % sync, repr(ctx))
        with self.assertRaises(ValueError):
            accel.Context(backend="cpu", sync="sometimes")

    def test_cuda_request_without_device_logs_the_fallback_line(self):
        if accel.backends()["cuda"]["available"]:
            self.skipTest("a CUDA device is present")
        lines = []
        with accel.Context(backend="cuda", log=lambda lvl, msg: lines.append((lvl, msg))) as ctx:
            self.assertEqual(ctx.info()["backend"], "cpu")
            self.assertEqual(ctx.stats()["ctx.init"]["fallbacks"], 1)
        warns = [m for lvl, m in lines if lvl == "warn"]
        self.assertEqual(len(warns), 1)
        self.assertRegex(warns[0], r"^\[GPU\] ctx\.init failed: .+[^.]\. CPU fallback\.$")
        with self.assertRaises(accel.AccelError) as e:
            accel.Context(backend="cuda", strict=True)
        self.assertEqual(e.exception.name, "ACCEL_ERR_NO_DEVICE")

    def test_to_gray_matches_pillow_arithmetic(self):
        rng = np.random.default_rng(1)
        with accel.Context(backend="cpu") as ctx:
            for c in (3, 4):
                img = rng.integers(0, 256, size=(37, 53, c), dtype=np.uint8)
                np.testing.assert_array_equal(ctx.to_gray(img), pillow_luma(img))
            gray = rng.integers(0, 256, size=(9, 11), dtype=np.uint8)
            np.testing.assert_array_equal(ctx.to_gray(gray), gray)
            # numpy views: flipped, BGR-reversed, sliced; output into a strided view
            img = rng.integers(0, 256, size=(40, 60, 3), dtype=np.uint8)
            view = img[::-1, ::2, ::-1]
            out = np.zeros((40, 60), dtype=np.uint8)[:, ::2]
            ctx.to_gray(view, out=out)
            np.testing.assert_array_equal(out, pillow_luma(np.ascontiguousarray(view)))
            st = ctx.stats()["image.gray"]
            self.assertEqual(st["runs"], st["cpu_runs"])
            self.assertGreaterEqual(st["runs"], 4)

    def test_errors_raise_with_status_and_message(self):
        with accel.Context(backend="cpu") as ctx:
            with self.assertRaises(accel.AccelError) as e:
                ctx.to_gray(np.zeros((4, 4, 3), dtype=np.uint8), out=np.zeros((5, 4), dtype=np.uint8))
            self.assertEqual(e.exception.name, "ACCEL_ERR_INVALID_ARG")
            self.assertIn("dst is 5x4 but src is 4x4", str(e.exception))
            with self.assertRaises(accel.AccelError):
                ctx.to_gray(np.zeros((4, 4, 3), dtype=np.float32), out=np.zeros((4, 4), dtype=np.uint8))
            with self.assertRaises(TypeError):
                ctx.to_gray([[1, 2]])
        with self.assertRaises(accel.AccelError) as e:
            accel.Context(threads=-1)
        self.assertIn("cpu_threads", str(e.exception))


class Hashing(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ref = reference()
        cls.ctx = accel.Context(backend="cpu")

    @classmethod
    def tearDownClass(cls):
        cls.ctx.close()

    def test_files_match_imagehash(self):
        names = sorted(self.ref)
        r = self.ctx.hash_files([os.path.join(HASHDATA, n) for n in names], kinds=accel.HASH_KINDS)
        for i, n in enumerate(names):
            if self.ref[n]["mode"] == "error":
                self.assertEqual(r.error(i)[0], "ACCEL_ERR_DECODE", n)
                self.assertIsNone(r.hex(i, "ahash"))
                continue
            for k in accel.HASH_KINDS:
                self.assertEqual(r.hex(i, k), self.ref[n][k + "8"], (n, k))
        ok = [i for i, n in enumerate(names) if self.ref[n]["mode"] != "error"]
        u = r.u64("dhash")
        self.assertEqual(u.dtype, np.uint64)
        for i in ok:
            self.assertEqual(int(u[i]), int(self.ref[names[i]]["dhash8"], 16))
        with self.assertRaises(ValueError):
            r.u64("colorhash")
        d = r.to_dicts()
        self.assertEqual(set(d[ok[0]]), set(accel.HASH_KINDS))

    def test_bytes_and_size_16(self):
        names = ["hopper.jpg", "pil123p.png", "pil_sample_cmyk.jpg"]
        blobs = []
        for n in names:
            with open(os.path.join(HASHDATA, n), "rb") as f:
                blobs.append(f.read())
        r = self.ctx.hash_bytes(blobs + [b"garbage"], kinds=["phash", "whash"], size=16)
        for i, n in enumerate(names):
            self.assertEqual(r.hex(i, "phash"), self.ref[n]["phash16"])
            self.assertEqual(r.hex(i, "whash"), self.ref[n]["whash16"])
        self.assertEqual(r.error(3)[0], "ACCEL_ERR_FORMAT")

    def test_numpy_arrays_hash_like_pil_fromarray(self):
        rgb, mode = self.ctx.decode(os.path.join(HASHDATA, "hopper.png"))
        self.assertEqual((rgb.shape, rgb.dtype, mode), ((128, 128, 3), np.uint8, "RGB"))
        gray, mode = self.ctx.decode(os.path.join(HASHDATA, "hopper_gray.jpg"), gray=True)
        self.assertEqual((gray.ndim, mode), (2, "L"))
        rgba = np.dstack([rgb, np.arange(128 * 128, dtype=np.uint32).reshape(128, 128).astype(np.uint8)])
        r = self.ctx.hash_arrays([rgb, gray, rgba, rgb[::-1, :, ::-1][::-1, :, ::-1]], kinds=accel.HASH_KINDS)
        for k in accel.HASH_KINDS:
            self.assertEqual(r.hex(0, k), self.ref["hopper.png"][k + "8"])
            self.assertEqual(r.hex(1, k), self.ref["hopper_gray.jpg"][k + "8"])
            self.assertEqual(r.hex(2, k), r.hex(0, k))  # alpha is ignored
            self.assertEqual(r.hex(3, k), r.hex(0, k))  # a strided view of the same pixels
        with self.assertRaises(accel.AccelError):
            self.ctx.hash_arrays([np.zeros((4, 4, 5), np.uint8)])
        with self.assertRaises(ValueError):
            self.ctx.hash_files([os.path.join(HASHDATA, "hopper.png")], kinds=["md5"])

    def test_helpers(self):
        self.assertEqual(accel.distance("8100000000000001", "0100000000000000"), 2)
        bits = accel.hex_to_bits("8100000000000001", 64)
        self.assertEqual(np.flatnonzero(bits).tolist(), [0, 7, 63])
        calls = []
        r = self.ctx.hash_files([os.path.join(HASHDATA, "hopper.png")] * 3,
                                progress=lambda stage, f: calls.append((stage, f)))
        self.assertTrue(all(r.ok(i) for i in range(3)))
        self.assertEqual(calls[-1], ("hash.batch", 1.0))

    def assertSameResult(self, a, b):
        self.assertEqual((a.kinds, a.size, a.binbits, a.messages), (b.kinds, b.size, b.binbits, b.messages))
        np.testing.assert_array_equal(a.hashes, b.hashes)
        np.testing.assert_array_equal(a.status, b.status)

    def test_ctx_hash_equals_the_hash_methods(self):
        self.assertIsInstance(self.ctx.hash, accel.Hash)
        files = [os.path.join(HASHDATA, n) for n in ("hopper.png", "pil123p.png", "no_such.png")]
        for kw in ({}, {"kinds": accel.HASH_KINDS}, {"kinds": ["phash", "whash"], "size": 16, "fast": True}):
            self.assertSameResult(self.ctx.hash.files(files, **kw), self.ctx.hash_files(files, **kw))
        with open(files[0], "rb") as f:
            blobs = [f.read(), b"garbage"]
        self.assertSameResult(self.ctx.hash.bytes(blobs, ["dhash"]), self.ctx.hash_bytes(blobs, ["dhash"]))
        rgb, _ = self.ctx.decode(files[0])
        self.assertSameResult(self.ctx.hash.arrays([rgb], binbits=4), self.ctx.hash_arrays([rgb], binbits=4))
        self.assertEqual(self.ctx.hash.files(files).to_dicts(), self.ctx.hash_files(files).to_dicts())
        for name in ("files", "bytes", "arrays"):
            old = getattr(accel.Context, "hash_" + name)
            self.assertEqual(old.__doc__, getattr(accel.Hash, name).__doc__)
            self.assertEqual(old.__name__, "hash_" + name)
        for call in (lambda: self.ctx.hash.files(files[:1], kinds=["md5"]),
                     lambda: self.ctx.hash_files(files[:1], kinds=["md5"])):
            with self.assertRaisesRegex(ValueError, "unknown hash kind 'md5'"):
                call()
        closed = accel.Context(backend="cpu")
        closed.close()
        for call in (closed.hash.arrays, closed.hash_arrays):
            with self.assertRaisesRegex(ValueError, "the context is closed"):
                call([rgb])


def np_distances(a, b):
    """Hamming distances of every pair of rows of uint64 arrays a (n, w) and
    b (m, w): numpy's unpackbits, nothing shared with the library."""
    x = a[:, None, :] ^ b[None, :, :]
    return np.unpackbits(x.view(np.uint8), axis=-1).sum(axis=-1, dtype=np.uint32)


def np_components(ids, edges):
    parent = {int(i): int(i) for i in ids}

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for a, b in edges:
        parent[find(int(a))] = find(int(b))
    groups = {}
    for i in ids:
        groups.setdefault(find(int(i)), []).append(int(i))
    return sorted(sorted(g) for g in groups.values() if len(g) > 1)


class Index(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ctx = accel.Context(backend="cpu")
        rng = np.random.default_rng(7)
        # 3000 entries, 2 fields of 128 bits: clusters around 40 centres, copies, noise
        centres = rng.integers(0, 2**64, size=(40, 2, 2), dtype=np.uint64)
        pick = rng.integers(0, 40, size=3000)
        codes = centres[pick].copy()
        flips = rng.integers(0, 128, size=(3000, 2, 6))
        for i in range(3000):
            for f in range(2):
                for b in flips[i, f, : rng.integers(0, 7)]:
                    codes[i, f, b // 64] ^= np.uint64(1) << np.uint64(63 - b % 64)
        codes[::7] = rng.integers(0, 2**64, size=codes[::7].shape, dtype=np.uint64)
        cls.codes = codes
        cls.ids = rng.permutation(10**6)[:3000].astype(np.uint64)
        cls.d0 = np_distances(codes[:, 0], codes[:, 0])
        cls.d1 = np_distances(codes[:, 1], codes[:, 1])

    @classmethod
    def tearDownClass(cls):
        cls.ctx.close()

    def build(self):
        ix = accel.Index(self.ctx, bits=128, nfields=2)
        ix.add(self.ids, self.codes, labels=["img%d.jpg" % i for i in range(len(self.ids))])
        return ix

    def reference_pairs(self, t0, t1, rule):
        m = (self.d0 <= t0) & (self.d1 <= t1) if rule == "all" else (self.d0 <= t0) | (self.d1 <= t1)
        i, j = np.nonzero(np.triu(m, 1))
        a, b = self.ids[i], self.ids[j]
        pairs = sorted(zip(np.minimum(a, b).tolist(), np.maximum(a, b).tolist(), self.d0[i, j].tolist(),
                           self.d1[i, j].tolist()))
        return pairs

    def test_self_join_and_groups_equal_numpy(self):
        ix = self.build()
        self.assertEqual(len(ix), 3000)
        for t0, t1, rule in ((3, 3, "all"), (0, 9, "any"), (8, 2, "all")):
            want = self.reference_pairs(t0, t1, rule)
            self.assertGreater(len(want), 100)
            for alg in ("auto", "brute_force", "multi_index"):
                first, second, dist = ix.self_join([t0, t1], rule=rule, algorithm=alg)
                self.assertEqual((first.dtype, second.dtype, dist.shape), (np.uint64, np.uint64, (len(first), 2)))
                got = list(zip(first.tolist(), second.tolist(), dist[:, 0].tolist(), dist[:, 1].tolist()))
                self.assertEqual(got, want, (t0, t1, rule, alg))
            groups = ix.groups([t0, t1], rule=rule)
            want_groups = np_components(self.ids, [(a, b) for a, b, _, _ in want])
            self.assertEqual([g.tolist() for g in groups], want_groups)
            self.assertEqual([g.tolist() for g in accel.groups_from_pairs(first, second)], want_groups)

    def test_range_and_knn_equal_numpy(self):
        ix = self.build()
        q = self.codes[:50].copy()
        q[::3, 1] ^= np.uint64(0xF0)
        first, second, dist = ix.range(q, thresholds=[4, 6], rule="all")
        dq0 = np_distances(q[:, 0], self.codes[:, 0])
        dq1 = np_distances(q[:, 1], self.codes[:, 1])
        qi, j = np.nonzero((dq0 <= 4) & (dq1 <= 6))
        want = sorted(zip(qi.tolist(), self.ids[j].tolist()))
        self.assertEqual(list(zip(first.tolist(), second.tolist())), want)
        ids, d = ix.knn(q, 5, field=1)
        for r in range(len(q)):
            order = sorted(zip(dq1[r].tolist(), self.ids.tolist()))[:5]
            self.assertEqual(list(zip(d[r].tolist(), ids[r].tolist())), order)
        small = accel.Index(self.ctx)
        small.add([5, 9], np.array([0, 3], dtype=np.uint64))
        ids, d = small.knn(np.array([1], dtype=np.uint64), 3)
        self.assertEqual(ids[0].tolist(), [5, 9, 2**64 - 1])
        self.assertEqual(d[0].tolist(), [1, 1, 2**32 - 1])

    def test_container_save_load_and_errors(self):
        import tempfile
        ix = self.build()
        ix.meta = "kinds=dhash,ahash"
        with self.assertRaises(accel.AccelError) as e:
            ix.add([self.ids[0]], self.codes[:1])
        self.assertEqual(e.exception.name, "ACCEL_ERR_INVALID_ARG")
        self.assertEqual(ix.remove([self.ids[1], 123456789]), 1)
        self.assertNotIn(int(self.ids[1]), ix)
        self.assertIn(int(self.ids[2]), ix)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "x.idx")
            ix.save(path)
            back = accel.Index.load(self.ctx, path)
            self.assertEqual((back.bits, back.nfields, len(back), back.meta), (128, 2, 2999, "kinds=dhash,ahash"))
            a, b = ix.entries(), back.entries()
            for x, y in zip(a, b):
                if isinstance(x, list):
                    self.assertEqual(x, y)
                else:
                    np.testing.assert_array_equal(x, y)
            with open(path, "r+b") as f:
                f.seek(100)
                f.write(b"\x00\x01")
            with self.assertRaises(accel.AccelError) as e:
                accel.Index.load(self.ctx, path)
            self.assertEqual(e.exception.name, "ACCEL_ERR_FORMAT")
        with self.assertRaises(ValueError):
            ix.self_join([1, 2, 3])
        with self.assertRaises(ValueError):
            ix.add([1], np.zeros((1, 3), np.uint64))
        with self.assertRaises(ValueError):
            ix.self_join(1, rule="most")
        with self.assertRaises(accel.AccelError):
            ix.self_join(129)

    def test_hashes_into_an_index_group_like_imagehash(self):
        ref = {n: r for n, r in reference().items() if r["mode"] != "error"}
        names = sorted(ref)
        h = self.ctx.hash_files([os.path.join(HASHDATA, n) for n in names], kinds=("dhash", "ahash"))
        ix = accel.Index(self.ctx, nfields=2)
        ix.add(np.arange(len(names)), np.stack([h.u64("dhash"), h.u64("ahash")], axis=1))
        got = [[names[i] for i in g] for g in ix.groups(5)]
        def dist(a, b):
            return bin(int(a, 16) ^ int(b, 16)).count("1")
        edges = [(i, j) for i in range(len(names)) for j in range(i + 1, len(names))
                 if dist(ref[names[i]]["dhash8"], ref[names[j]]["dhash8"]) <= 5
                 and dist(ref[names[i]]["ahash8"], ref[names[j]]["ahash8"]) <= 5]
        want = [[names[i] for i in g] for g in np_components(range(len(names)), edges)]
        self.assertEqual(got, want)
        self.assertGreaterEqual(len(want), 3)


CTDATA = os.path.join(os.environ["ACCEL_SOURCE_ROOT"], "tests", "data", "ct")


def ct_fixture(name):
    import gzip
    import io
    folder = os.path.join(CTDATA, name)
    arrays = {}
    for k in ("input", "filled", "pores", "edt", "markers", "labels"):
        with gzip.open(os.path.join(folder, k + ".npy.gz")) as f:
            arrays[k] = np.load(io.BytesIO(f.read()))
    meta = {}
    with open(os.path.join(folder, "meta.txt")) as f:
        for line in f:
            key, _, value = line.strip().partition(" ")
            meta[key] = value
    spacing = tuple(float(x) for x in meta["sampling"].strip("()").split(","))
    return arrays, float(meta["threshold"]), meta["pores"], spacing


class CT(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ctx = accel.Context(backend="cpu")

    @classmethod
    def tearDownClass(cls):
        cls.ctx.close()

    def test_stages_and_pipeline_equal_the_references(self):
        ct = self.ctx.ct
        for name in ("berea_pore", "food_aniso_64x96x80_s1"):
            a, thr, pores_mode, spacing = ct_fixture(name)
            solid = ct.threshold(a["input"], thr)
            self.assertEqual(solid.dtype, bool)
            np.testing.assert_array_equal(solid, a["input"] > thr)
            filled = ct.fill_holes(solid)
            np.testing.assert_array_equal(filled, a["filled"].astype(bool))
            pores = a["pores"].astype(bool)
            np.testing.assert_array_equal(ct.edt(pores, spacing), a["edt"])
            markers, n = ct.markers(a["edt"], pores)
            np.testing.assert_array_equal(markers, a["markers"])
            self.assertEqual(n, a["markers"].max())
            np.testing.assert_array_equal(ct.watershed(-a["edt"], a["markers"], mask=pores), a["labels"])
            r = ct.pipeline(a["input"], thr, pores=pores_mode, spacing=spacing)
            for k in ("filled", "pores", "edt", "markers", "labels"):
                np.testing.assert_array_equal(r[k], a[k].astype(r[k].dtype), err_msg=k)
            self.assertEqual(r["marker_count"], a["markers"].max())
            net = r["network"]
            lab = a["labels"]
            self.assertAlmostEqual(net["porosity"], (lab > 0).mean(), places=12)
            counts = np.bincount(lab.ravel())[1:]
            self.assertEqual([reg["voxels"] for reg in net["regions"]], counts[counts > 0].tolist())

    def test_network_equals_numpy(self):
        a, _, _, _ = ct_fixture("berea_pore")
        lab, edt = a["labels"], a["edt"]
        spacing = (0.5, 1.0, 2.0)
        net = self.ctx.ct.network(lab, edt, spacing)
        idx = np.indices(lab.shape).reshape(3, -1).astype(float)
        flat = lab.ravel()
        for reg in net["regions"]:
            sel = flat == reg["label"]
            self.assertEqual(reg["voxels"], sel.sum())
            self.assertAlmostEqual(reg["volume"], sel.sum() * 1.0, places=9)
            for ax in range(3):
                self.assertAlmostEqual(reg["centroid"][ax], idx[ax, sel].mean() * spacing[ax], places=9)
            self.assertEqual(reg["inscribed_radius"], float(edt.ravel()[sel].max()))
        # throats: face-adjacent pairs of different labels along each axis
        want = {}
        area = {0: 2.0, 1: 1.0, 2: 0.5}
        for ax in range(3):
            sl0 = [slice(None)] * 3
            sl1 = [slice(None)] * 3
            sl0[ax] = slice(0, -1)
            sl1[ax] = slice(1, None)
            p, q = lab[tuple(sl0)].ravel(), lab[tuple(sl1)].ravel()
            ep, eq = edt[tuple(sl0)].ravel(), edt[tuple(sl1)].ravel()
            m = (p > 0) & (q > 0) & (p != q)
            for u, v, r in zip(np.minimum(p[m], q[m]), np.maximum(p[m], q[m]), np.minimum(ep[m], eq[m])):
                t = want.setdefault((int(u), int(v)), [0, 0.0, 0.0])
                t[0] += 1
                t[1] += area[ax]
                t[2] = max(t[2], float(r))
        got = {(t["a"], t["b"]): [t["faces"], t["area"], t["inscribed_radius"]] for t in net["throats"]}
        self.assertEqual(sorted(got), sorted(want))
        for k in want:
            self.assertEqual(got[k][0], want[k][0])
            self.assertAlmostEqual(got[k][1], want[k][1], places=9)
            self.assertEqual(got[k][2], want[k][2])

    def test_trims_equal_porespy(self):
        import gzip
        import io

        def ref(name):
            with gzip.open(os.path.join(CTDATA, "berea_pore", name + ".npy.gz")) as f:
                return np.load(io.BytesIO(f.read()))
        a, _, _, _ = ct_fixture("berea_pore")
        ct = self.ctx.ct
        for peaks, suffix in ((a["markers"], ""), (ref("peaks_md1"), "_md1")):
            for trim, kind in (("saddles", "saddles"), (("nearby",), "nearby"), (("saddles", "nearby"), "both")):
                got, n = ct.trim_markers(a["edt"], peaks, trim=trim)
                want = ref("trim_%s%s" % (kind, suffix))
                np.testing.assert_array_equal(got, want, err_msg=kind + suffix)
                self.assertEqual(n, want.max())
        both = ref("trim_both")
        got, n = ct.markers(a["edt"], a["pores"], trim=("saddles", "nearby"))
        np.testing.assert_array_equal(got, both)
        r = ct.pipeline(a["input"], 0, pores="all", trim=("saddles", "nearby"), outputs=("markers", "labels"))
        np.testing.assert_array_equal(r["markers"], both)
        self.assertEqual(r["marker_count"], both.max())
        with self.assertRaises(ValueError):
            ct.trim_markers(a["edt"], a["markers"], trim="peaks")

    def test_2d_trims_equal_porespy(self):
        """PoreSpy 3.2.0's 2-D trims (tests/data/ct/make_trim_refs_2d.py) of three porous images."""
        r = np.load(os.path.join(CTDATA, "trim_refs_2d.npz"))
        ct = self.ctx.ct
        for k in range(3):
            edt, peaks = r["edt_%d" % k], r["peaks_%d" % k]
            for trim, kind in (("saddles", "saddles"), ("nearby", "nearby"), (("saddles", "nearby"), "both")):
                got, n = ct.trim_markers(edt, peaks, trim=trim)
                want = r["%s_%d" % (kind, k)]
                self.assertEqual(got.shape, edt.shape)
                np.testing.assert_array_equal(got, want, err_msg="%s %d" % (kind, k))
                self.assertEqual(n, want.max())
        # the markers' own trims are trim_markers' of the peaks found
        edt = r["edt_0"]
        pores = edt > 0
        found, _ = ct.markers(edt, pores, min_distance=1)
        got, n = ct.markers(edt, pores, min_distance=1, trim=("saddles", "nearby"))
        want, m = ct.trim_markers(edt, found, trim=("saddles", "nearby"))
        np.testing.assert_array_equal(got, want)
        self.assertEqual(n, m)
        with self.assertRaises(ValueError):
            ct.trim_markers(edt, peaks[:, :-1])

    def test_2d_network_measures(self):
        """A 2-D label image's network against measures computed here with numpy."""
        import math
        rng = np.random.default_rng(4)
        lab = rng.integers(0, 5, (23, 31)).astype(np.int32)
        lab[rng.random(lab.shape) < 0.4] = 0
        edt = rng.random(lab.shape).astype(np.float32) * 3
        sy, sx = 0.5, 2.0
        net = self.ctx.ct.network(lab, edt, spacing=(sy, sx))
        self.assertAlmostEqual(net["porosity"], float((lab > 0).mean()), places=12)
        ys, xs = np.indices(lab.shape)
        for reg in net["regions"]:
            on = lab == reg["label"]
            area = on.sum() * sy * sx
            self.assertEqual(reg["voxels"], on.sum())
            self.assertAlmostEqual(reg["volume"], area, places=9)
            self.assertAlmostEqual(reg["equivalent_radius"], math.sqrt(area / math.pi), places=9)
            self.assertEqual(len(reg["centroid"]), 2)
            self.assertAlmostEqual(reg["centroid"][0], ys[on].mean() * sy, places=9)
            self.assertAlmostEqual(reg["centroid"][1], xs[on].mean() * sx, places=9)
            self.assertEqual(reg["inscribed_radius"], edt[on].max())
        want = {}
        for a, b, ea, eb, length in ((lab[:-1], lab[1:], edt[:-1], edt[1:], sx), (lab[:, :-1], lab[:, 1:], edt[:, :-1],
                                                                                   edt[:, 1:], sy)):
            for i, j, u, v in zip(a.ravel(), b.ravel(), ea.ravel(), eb.ravel()):
                if i > 0 and j > 0 and i != j:
                    key = (min(i, j), max(i, j))
                    t = want.setdefault(key, [0, 0.0, 0.0])
                    t[0] += 1
                    t[1] += length
                    t[2] = max(t[2], float(min(u, v)))
        got = {(t["a"], t["b"]): t for t in net["throats"]}
        self.assertEqual(sorted(got), sorted(want))
        for key, (edges, length, radius) in want.items():
            self.assertEqual(got[key]["faces"], edges)
            self.assertAlmostEqual(got[key]["area"], length, places=9)
            self.assertEqual(got[key]["inscribed_radius"], radius)
        # the 2-D pipeline's trims and network are those of its own outputs
        img = np.where(edt > 0.8, 0, 200).astype(np.uint8)
        r = self.ctx.ct.pipeline(img, 100, trim=("saddles", "nearby"), min_distance=1,
                                 outputs=("edt", "markers", "labels", "network"))
        pores = r["edt"] > 0
        want_markers, _ = self.ctx.ct.markers(r["edt"], pores, min_distance=1, trim=("saddles", "nearby"))
        np.testing.assert_array_equal(r["markers"], want_markers)
        self.assertEqual(r["network"], self.ctx.ct.network(r["labels"], r["edt"]))

    def test_strided_views_rescale_and_errors(self):
        a, _, _, _ = ct_fixture("berea_pore")
        pores = a["pores"].astype(bool)
        t = pores.transpose(2, 1, 0)  # a strided view
        np.testing.assert_array_equal(self.ctx.ct.edt(t), self.ctx.ct.edt(np.ascontiguousarray(t)))
        v = np.arange(2 * 3 * 4, dtype=np.int16).reshape(2, 3, 4)
        out = self.ctx.ct.rescale(v, slope=[1.0, 2.0], intercept=-1024)
        np.testing.assert_array_equal(out, (v * np.array([1.0, 2.0])[:, None, None] - 1024).astype(np.float32))
        with self.assertRaises(ValueError):  # 1-D, 2-D and 3-D only
            self.ctx.ct.edt(pores[None])
        with self.assertRaises(TypeError):  # masks are numeric
            self.ctx.ct.edt(pores.astype(str))
        with self.assertRaises(accel.AccelError) as e:
            self.ctx.ct.edt(pores, spacing=(1, -1, 1))
        self.assertEqual(e.exception.name, "ACCEL_ERR_INVALID_ARG")


if __name__ == "__main__":
    unittest.main(verbosity=2)
