"""The Python package as SciPy and scikit-image users expect it: one path or
one array is one input, masks of any numeric dtype, 1-D and 2-D arrays,
sampling=, errors of the built-in types, bad names refused with the allowed
ones, progress bars, Ctrl-C, pickling, the index as bytes, and arrays from
other libraries (DLPack, CUDA array interface). Results are compared with
independent numpy implementations (and with SciPy and scikit-image where
they are installed), never with the library's own earlier output."""
import heapq
import io
import os
import pathlib
import pickle
import subprocess
import sys
import textwrap
import types
import unittest
import contextlib
from unittest import mock

from support import HASHDATA, SRC, clean_environment, require

np = require("numpy")
import accel  # noqa: E402

clean_environment()

PHOTO = os.path.join(HASHDATA, "hopper.png")


def optional(module):
    try:
        return __import__(module, fromlist=["_"])
    except ImportError:
        return None


scipy_ndimage = optional("scipy.ndimage")
skimage_segmentation = optional("skimage.segmentation")


# ------------------------------------------------------------ independent references

def edt_brute(mask, sampling):
    """Distance of every nonzero element to the nearest zero one, by brute force (float64)."""
    mask = np.asarray(mask) != 0
    sampling = np.broadcast_to(np.asarray(sampling, float), (mask.ndim,))
    zeros = np.argwhere(~mask) * sampling
    out = np.zeros(mask.shape)
    for p in np.argwhere(mask):
        out[tuple(p)] = np.sqrt(((zeros - p * sampling) ** 2).sum(axis=1)).min()
    return out


def neighbours(ndim, full):
    """Offsets of the face (full=False) or full neighbourhood."""
    grid = np.stack(np.meshgrid(*[[-1, 0, 1]] * ndim, indexing="ij"), -1).reshape(-1, ndim)
    keep = (np.abs(grid).sum(1) == 1) if not full else np.any(grid != 0, axis=1)
    return [tuple(o) for o in grid[keep]]


def fill_holes_bfs(mask, full):
    """Background elements not reached from the border through background are filled."""
    mask = np.asarray(mask) != 0
    reached = np.zeros(mask.shape, bool)
    stack = [tuple(p) for p in np.argwhere(~mask)
             if any(c == 0 or c == n - 1 for c, n in zip(p, mask.shape))]
    for p in stack:
        reached[p] = True
    offsets = neighbours(mask.ndim, full)
    while stack:
        p = stack.pop()
        for o in offsets:
            q = tuple(a + b for a, b in zip(p, o))
            if all(0 <= c < n for c, n in zip(q, mask.shape)) and not mask[q] and not reached[q]:
                reached[q] = True
                stack.append(q)
    return mask | ~reached


def watershed_heap(image, markers, mask=None):
    """A priority flood from the markers over face neighbours, lowest value first,
    each element labelled when first reached (values assumed distinct); markers
    outside the mask are dropped."""
    out = np.array(markers, np.int32)
    mask = np.ones(out.shape, bool) if mask is None else np.asarray(mask) != 0
    out[~mask] = 0
    heap = [(image[tuple(p)], tuple(p)) for p in np.argwhere(out != 0)]
    heapq.heapify(heap)
    offsets = neighbours(out.ndim, False)
    while heap:
        _, p = heapq.heappop(heap)
        for o in offsets:
            q = tuple(a + b for a, b in zip(p, o))
            if all(0 <= c < n for c, n in zip(q, out.shape)) and mask[q] and out[q] == 0:
                out[q] = out[p]
                heapq.heappush(heap, (image[q], q))
    return out


# ------------------------------------------------------------ a host DLPack array of another library

class FakeTensor:
    """An array of a library that is not numpy, speaking only DLPack (as a PyTorch CPU tensor does)."""

    def __init__(self, a):
        self._a = np.asarray(a)

    def __dlpack__(self, stream=None, **kwargs):
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()

    def numpy(self):
        return self._a


fake_tensor_module = types.ModuleType("faketensorlib")
fake_tensor_module.FakeTensor = FakeTensor
fake_tensor_module.from_dlpack = lambda x: FakeTensor(np.from_dlpack(x))
FakeTensor.__module__ = "faketensorlib"
sys.modules["faketensorlib"] = fake_tensor_module


class FakeCupyArray:
    """What CuPy's ndarray shows of itself: the CUDA array interface (the pointer is never read)."""

    def __init__(self, shape):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "|u1", "data": (0x7f0000000000, False),
                                         "version": 3, "strides": None}


class FakeCupyLike:
    """A CuPy-like device array whose data the test keeps on the host: .get() copies to numpy and
    its module's asarray makes one; the CUDA array interface is never read."""

    def __init__(self, a):
        self._a = np.array(a)
        self.__cuda_array_interface__ = {"shape": self._a.shape, "typestr": self._a.dtype.str,
                                         "data": (0x7f0000000000, False), "version": 3, "strides": None}

    def get(self):
        return self._a.copy()


fake_cupy_module = types.ModuleType("fakecupylib")
fake_cupy_module.asarray = FakeCupyLike
FakeCupyLike.__module__ = "fakecupylib"
sys.modules["fakecupylib"] = fake_cupy_module


class FakeCudaDlpack:
    """A device array that speaks only DLPack, on device type 2 (kDLCUDA)."""

    def __dlpack__(self, stream=None, **kwargs):
        raise AssertionError("a device array must not be read on the host")

    def __dlpack_device__(self):
        return (2, 0)


class Pythonic(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ctx = accel.Context(backend="cpu", threads=2)
        cls.rng = np.random.default_rng(13)

    @classmethod
    def tearDownClass(cls):
        cls.ctx.close()

    # ---------------------------------------------------------------- misuse cases

    def test_a_path_string_is_one_path(self):
        ref = self.ctx.hash.files([PHOTO], kinds="dhash").hex(0, "dhash")
        for one in (PHOTO, pathlib.Path(PHOTO), os.fsencode(PHOTO)):
            r = self.ctx.hash.files(one, kinds="dhash")
            self.assertEqual(len(r), 1, type(one))
            self.assertEqual(r.hex(0, "dhash"), ref)
        self.assertEqual(len(self.ctx.hash_files(PHOTO)), 1)  # the older name too
        with open(PHOTO, "rb") as f:
            blob = f.read()
        for one in (blob, bytearray(blob), memoryview(blob)):
            self.assertEqual(self.ctx.hash.bytes(one, kinds="dhash").hex(0, "dhash"), ref)
        with self.assertRaisesRegex(TypeError, "paths must be one"):
            self.ctx.hash.files(42)

    def test_one_array_is_one_image(self):
        rgb = self.rng.integers(0, 256, (40, 30, 3), dtype=np.uint8)
        one = self.ctx.hash.arrays(rgb, kinds="ahash")
        self.assertEqual(len(one), 1)
        self.assertEqual(one.hex(0, "ahash"), self.ctx.hash.arrays([rgb], kinds="ahash").hex(0, "ahash"))
        stack = self.rng.integers(0, 256, (3, 16, 16), dtype=np.uint8)
        self.assertEqual(len(self.ctx.hash.arrays(list(stack))), 3)
        with self.assertRaises(ValueError):  # a (3, 16, 16) array is one image of 16 channels: refused
            self.ctx.hash.arrays(stack)
        with self.assertRaisesRegex(TypeError, "must be uint8"):
            self.ctx.hash.arrays(rgb.astype(np.float32))

    def test_int_and_float_masks(self):
        mask = self.rng.random((9, 11, 10)) > 0.3
        want = edt_brute(mask, 1).astype(np.float32)
        for m in (mask, mask.astype(np.int64), mask.astype(np.uint8) * 7, mask.astype(np.float64) * 0.5,
                  np.where(mask, -3, 0).astype(np.int16)):
            np.testing.assert_array_equal(self.ctx.ct.edt(m), want, err_msg=str(m.dtype))
            np.testing.assert_array_equal(self.ctx.ct.fill_holes(m), fill_holes_bfs(mask, False))
        with self.assertRaises(TypeError):
            self.ctx.ct.edt(mask.astype(str))

    def test_cuda_array_without_a_device(self):
        if accel.backends()["cuda"]["available"]:
            self.skipTest("a CUDA device is present: GPU arrays are taken there")
        for obj in (FakeCupyArray((4, 4)), FakeCudaDlpack()):
            for call in (lambda: self.ctx.ct.edt(obj), lambda: self.ctx.hash.arrays(obj),
                         lambda: self.ctx.svf.sky(obj, 1.0), lambda: self.ctx.to_gray(obj)):
                with self.assertRaises(TypeError) as e:
                    call()
                self.assertIsInstance(e.exception, accel.DeviceArrayError)
                self.assertIn("GPU array", str(e.exception))
                self.assertIn("host", str(e.exception))

    def test_gpu_arrays_are_staged_where_a_device_is_usable(self):
        # The staging logic on the host: the library is told a device is usable.
        mask = self.rng.random((6, 7)) > 0.3
        with mock.patch.object(accel._arrays, "cuda_usable", lambda: True):
            got = self.ctx.ct.edt(FakeCupyLike(mask.astype(np.uint8)), sampling=2.0)
            with self.assertRaisesRegex(accel.DeviceArrayError, "cannot copy from"):
                self.ctx.ct.edt(FakeCupyArray((4, 4)))
        self.assertIsInstance(got, FakeCupyLike)
        np.testing.assert_array_equal(got.get(), edt_brute(mask, 2.0).astype(np.float32))

    def test_bad_names_list_the_allowed_ones(self):
        cases = [
            (lambda: accel.Context(backend="gpu"), "backend must be one of 'auto', 'cpu', 'cuda', not 'gpu'"),
            (lambda: accel.Context(log_level="verbose"), "log_level must be one of 'debug'"),
            (lambda: self.ctx.ct.threshold(np.zeros((2, 2)), 0, compare="=>"), "compare must be one of '>'"),
            (lambda: self.ctx.ct.watershed(np.zeros(3), np.ones(3, int), ties="random"), "'skimage', 'stable'"),
            (lambda: self.ctx.ct.pipeline(np.zeros((3, 3, 3), np.uint8), 0, pores="some"), "'closed', 'all'"),
            (lambda: self.ctx.ct.pipeline(np.zeros((3, 3, 3), np.uint8), 0, outputs="mask"), "output must be"),
            (lambda: self.ctx.hash.arrays(np.zeros((8, 8), np.uint8), kinds="md5"), "'ahash', 'dhash'"),
            (lambda: accel.Index(self.ctx).groups(rule="most"), "rule must be one of 'all', 'any'"),
            (lambda: accel.Transform((8, 8)).warp(np.zeros((8, 8), np.uint8), interp="nearest"), "'linear'"),
        ]
        for call, message in cases:
            with self.assertRaises(ValueError) as e:
                call()
            self.assertNotIsInstance(e.exception, KeyError)
            self.assertIn(message, str(e.exception))

    # ---------------------------------------------------------------- errors

    def test_errors_are_builtin_types_with_status_and_message(self):
        with self.assertRaises(ValueError) as e:
            accel.Context(threads=-1)
        self.assertIsInstance(e.exception, accel.InvalidArgumentError)
        self.assertIsInstance(e.exception, accel.AccelError)
        self.assertEqual((e.exception.status, e.exception.name), (1, "ACCEL_ERR_INVALID_ARG"))
        self.assertIn("cpu_threads", e.exception.message)
        with self.assertRaises(OSError) as e:
            self.ctx.decode(os.path.join(SRC, "no such file.png"))
        self.assertIsInstance(e.exception, accel.AccelIOError)
        self.assertIsNone(e.exception.errno)
        with self.assertRaises(ValueError) as e:
            self.ctx.decode(b"not an image")
        self.assertEqual(e.exception.name, "ACCEL_ERR_FORMAT")
        expected = {1: ValueError, 2: MemoryError, 3: OSError, 4: OSError, 5: MemoryError, 6: NotImplementedError,
                    8: OSError, 9: ValueError, 10: ValueError, 11: ValueError, 12: ValueError, 13: LookupError}
        for status, base in expected.items():
            err = accel.AccelError(status, "message %d" % status)
            self.assertIsInstance(err, base)
            self.assertIsInstance(err, RuntimeError)
            back = pickle.loads(pickle.dumps(err))
            self.assertIs(type(back), type(err))
            self.assertEqual((back.status, back.message, str(back)), (status, err.message, str(err)))

    # ---------------------------------------------------------------- dtypes and dimensions

    def test_threshold_dtype_rule(self):
        base = self.rng.integers(-100, 100, (4, 5, 6))
        for dtype in (np.int8, np.int64, np.uint32, np.uint64, np.float16, np.float64, bool):
            v = np.abs(base).astype(dtype) if dtype in (np.uint32, np.uint64) else base.astype(dtype)
            for compare, op in ((">", np.greater), ("<=", np.less_equal)):
                np.testing.assert_array_equal(self.ctx.ct.threshold(v, 10, compare), op(v, 10), err_msg=str(dtype))
        big = np.array([[[2 ** 40]]], np.int64)
        with self.assertRaisesRegex(ValueError, "outside int32's range"):
            self.ctx.ct.threshold(big, 0)
        with self.assertRaises(TypeError):
            self.ctx.ct.threshold(np.zeros((2, 2, 2), complex), 0)
        # the documented rule for float64: compared after rounding to float32
        near = np.array([1.0 + 2.0 ** -30, 1.0 - 2.0 ** -30, 1.5])
        np.testing.assert_array_equal(self.ctx.ct.threshold(near, 1.0), near.astype(np.float32) > 1.0)
        self.assertFalse(self.ctx.ct.threshold(near, 1.0)[0])
        line = np.array([1.0, 5.0, 9.0])
        np.testing.assert_array_equal(self.ctx.ct.threshold(line, 5, ">="), line >= 5)

    def test_edt_in_1d_2d_3d_with_sampling(self):
        for shape, sampling in (((31,), 0.5), ((13, 17), (2.0, 0.5)), ((13, 17), 3.0), ((6, 7, 8), (1.5, 1, 2))):
            mask = self.rng.random(shape) > 0.25
            mask.flat[0] = False
            want = edt_brute(mask, sampling)
            got = self.ctx.ct.edt(mask, sampling=sampling)
            self.assertEqual(got.shape, shape)
            np.testing.assert_array_equal(got, want.astype(np.float32), err_msg=str(shape))
            if scipy_ndimage is not None:
                np.testing.assert_array_equal(got, scipy_ndimage.distance_transform_edt(mask, sampling=sampling)
                                              .astype(np.float32))
        mask = self.rng.random((5, 6)) > 0.5
        np.testing.assert_array_equal(self.ctx.ct.edt(mask, spacing=(1, 2)), self.ctx.ct.edt(mask, sampling=(1, 2)))
        with self.assertRaisesRegex(ValueError, "sampling has 3 values for a 2-D input"):
            self.ctx.ct.edt(mask, sampling=(1, 1, 1))
        with self.assertRaises(TypeError):
            self.ctx.ct.edt(mask, sampling=1, spacing=1)
        with self.assertRaises(ValueError):
            self.ctx.ct.edt(mask[None, None])
        with self.assertRaises(ValueError):  # the library's check: positive and finite
            self.ctx.ct.edt(mask, sampling=-1)

    def test_rescale_of_a_slice_and_a_volume(self):
        vol = self.rng.integers(-1000, 3000, (3, 5, 4)).astype(np.int16)
        slope, intercept = np.array([1.0, 0.5, 2.0]), np.array([-1024.0, 0.0, 3.5])
        want = (vol * slope[:, None, None] + intercept[:, None, None]).astype(np.float32)
        np.testing.assert_array_equal(self.ctx.ct.rescale(vol, slope, intercept), want)
        np.testing.assert_array_equal(self.ctx.ct.rescale(vol[1], 0.5, 0.0), want[1])  # one (y, x) slice
        with self.assertRaises(ValueError):
            self.ctx.ct.rescale(vol[0, 0])

    def test_fill_holes_in_1d_2d_3d_and_connectivity(self):
        for shape in ((40,), (23, 19), (9, 10, 11)):
            mask = self.rng.random(shape) > 0.45
            for conn, full in ((1, False), (len(shape), True)):
                got = self.ctx.ct.fill_holes(mask.astype(np.int32), connectivity=conn)
                np.testing.assert_array_equal(got, fill_holes_bfs(mask, full), err_msg="%s %d" % (shape, conn))
                if scipy_ndimage is not None:
                    st = scipy_ndimage.generate_binary_structure(len(shape), len(shape) if full else 1)
                    np.testing.assert_array_equal(got, scipy_ndimage.binary_fill_holes(mask, structure=st))
                    np.testing.assert_array_equal(got, self.ctx.ct.fill_holes(mask, structure=st))
        ring = np.ones((5, 5), bool)
        ring[2, 2] = False
        ring[1, 1] = False  # a diagonal hole only 8-connectivity joins to the centre: both are holes either way
        self.assertTrue(self.ctx.ct.fill_holes(ring, connectivity=8).all())
        m3 = self.rng.random((4, 4, 4)) > 0.5
        np.testing.assert_array_equal(self.ctx.ct.fill_holes(m3, 26), self.ctx.ct.fill_holes(m3, connectivity=3))
        if scipy_ndimage is not None:  # 18-connectivity: faces and edges
            want = scipy_ndimage.binary_fill_holes(m3, structure=scipy_ndimage.generate_binary_structure(3, 2))
            np.testing.assert_array_equal(self.ctx.ct.fill_holes(m3, connectivity=2), want)
            np.testing.assert_array_equal(self.ctx.ct.fill_holes(m3, 18), want)
        with self.assertRaisesRegex(ValueError, "connectivity for a 2-D mask must be one of 1, 2, 4, 8"):
            self.ctx.ct.fill_holes(ring, connectivity=6)
        with self.assertRaises(NotImplementedError):
            self.ctx.ct.fill_holes(ring, structure=np.ones((3, 3), bool) & np.eye(3, dtype=bool))

    def test_watershed_in_1d_2d_3d(self):
        for shape in ((50,), (24, 31), (7, 9, 8)):
            image = self.rng.permutation(np.prod(shape)).reshape(shape).astype(np.float64) / 7.0
            markers = np.zeros(shape, np.int64)
            for label, p in enumerate(self.rng.choice(markers.size, 4, replace=False), 1):
                markers.flat[p] = label
            mask = self.rng.random(shape) > 0.1
            for m in (None, mask.astype(np.float32)):
                got = self.ctx.ct.watershed(image, markers, mask=m)
                np.testing.assert_array_equal(got, watershed_heap(image, markers, m), err_msg=str(shape))
                if skimage_segmentation is not None:
                    np.testing.assert_array_equal(got, skimage_segmentation.watershed(
                        image, markers, mask=None if m is None else m != 0))
        image, markers = np.zeros((4, 4)), np.eye(4, dtype=np.int32)
        # connectivity, watershed_line, compactness and markers as a count or None: test_watershed_options.py
        np.testing.assert_array_equal(self.ctx.ct.watershed(image, markers, connectivity=np.ones((3, 3), bool)),
                                      self.ctx.ct.watershed(image, markers, connectivity=2))
        with self.assertRaises(NotImplementedError):  # not a ball of generate_binary_structure
            self.ctx.ct.watershed(image, markers, connectivity=np.eye(3, dtype=bool))
        with self.assertRaises(NotImplementedError):  # 2-D markers: test_peaks.py; smoothing is 3-D only
            self.ctx.ct.markers(image.astype(np.float32), image, smooth_sigma=1.0)
        with self.assertRaises(NotImplementedError):  # the trims take 2-D and 3-D maps
            self.ctx.ct.markers(np.ones(5, np.float32), np.ones(5), trim="saddles")
        with self.assertRaisesRegex(ValueError, "markers has values outside int32's range"):
            self.ctx.ct.watershed(image, markers.astype(np.int64) * 2 ** 40)

    def test_scalar_spacing_in_the_3d_stages(self):
        v = np.full((8, 8, 8), 200, np.uint8)
        v[2:6, 2:6, 2:6] = 0
        a = self.ctx.ct.pipeline(v, 100, spacing=2.0, outputs=("edt", "network"))
        b = self.ctx.ct.pipeline(v, 100, spacing=(2.0, 2.0, 2.0), outputs=("edt", "network"))
        np.testing.assert_array_equal(a["edt"], b["edt"])
        self.assertEqual(a["network"]["regions"][0]["volume"], 64 * 8.0)  # 4^3 voxels of 2^3

    # ---------------------------------------------------------------- progress and Ctrl-C

    def test_progress_true_draws_a_bar_and_callbacks_raise(self):
        dsm = self.rng.random((30, 30)).astype(np.float32) * 10
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            got = self.ctx.svf.sky(dsm, 1.0, progress=True)
        np.testing.assert_array_equal(got["svf"], self.ctx.svf.sky(dsm, 1.0)["svf"])
        if optional("tqdm") is None:
            self.assertIn("100%", err.getvalue())
            self.assertTrue(err.getvalue().endswith("\n"))

        def boom(stage, fraction):
            raise ZeroDivisionError("from the callback")
        with self.assertRaisesRegex(ZeroDivisionError, "from the callback"):
            self.ctx.svf.sky(dsm, 1.0, progress=boom)
        big = self.rng.random((100, 100)).astype(np.float32) * 10  # reports progress before its end
        with self.assertRaises(accel.CancelledError):
            self.ctx.svf.sky(big, 1.0, progress=lambda stage, fraction: True)
        with self.assertRaises(TypeError):
            self.ctx.svf.sky(dsm, 1.0, progress="yes")

    def test_ctrl_c_raises_keyboard_interrupt_promptly(self):
        script = textwrap.dedent("""
            import os, signal, threading, time
            import numpy as np, accel
            ctx = accel.Context(backend="cpu", threads=2)
            dsm = np.random.default_rng(0).random((1000, 1000)).astype(np.float32) * 20
            sent = []

            def ctrl_c():
                sent.append(time.monotonic())
                os.kill(os.getpid(), signal.SIGINT)
            threading.Timer(0.5, ctrl_c).start()
            try:
                ctx.svf.sky(dsm, 1.0, patches=612)
                print("FINISHED")
            except KeyboardInterrupt:
                print("INTERRUPTED %.3f" % (time.monotonic() - sent[0]))
            print("HANDLER RESTORED", signal.getsignal(signal.SIGINT) is signal.default_int_handler)
        """)
        r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.split("\n")
        self.assertTrue(lines[0].startswith("INTERRUPTED"), r.stdout + r.stderr)
        self.assertLess(float(lines[0].split()[1]), 3.0)  # seconds from the signal to the exception
        self.assertEqual(lines[1], "HANDLER RESTORED True")
        self.assertNotIn("Exception ignored", r.stderr)

    # ---------------------------------------------------------------- pickling and the index as bytes

    def test_contexts_and_indexes_pickle(self):
        ctx = accel.Context(backend="cpu", threads=3, log_level="error")
        back = pickle.loads(pickle.dumps(ctx))
        self.assertIsNot(back.handle, ctx.handle)
        self.assertEqual(back.info(), ctx.info())
        ix = accel.Index(ctx, bits=128, nfields=2)
        codes = self.rng.integers(0, 2 ** 63, (5, 2, 2), dtype=np.uint64)
        ix.add(np.arange(5), codes, labels=["a", None, "c", "d", "é"], stamps=np.arange(5) * 10)
        ix.meta = "meta data"
        for other in (pickle.loads(pickle.dumps(ix)), accel.Index.from_bytes(ctx, ix.to_bytes())):
            self.assertEqual(other.meta, "meta data")
            for x, y in zip(other.entries(), ix.entries()):
                np.testing.assert_array_equal(np.asarray(x, dtype=object), np.asarray(y, dtype=object))
        with self.assertRaises(ValueError):
            accel.Index.from_bytes(ctx, b"\0" * 64)

    def test_index_merge(self):
        a, b = accel.Index(self.ctx), accel.Index(self.ctx)
        a.add([1, 2], [0b1, 0b11], labels=["x", "y"])
        b.add([3, 4], [0b111, 0xffff], labels="z w".split(), stamps=[5, 6])
        a.merge(b)
        ids, codes, labels, stamps = a.entries()
        self.assertEqual(sorted(zip(ids.tolist(), codes[:, 0, 0].tolist(), labels, stamps.tolist())),
                         [(1, 1, "x", 0), (2, 3, "y", 0), (3, 7, "z", 5), (4, 0xffff, "w", 6)])
        c = accel.Index(self.ctx)
        c.add([4, 9], [0, 0])
        with self.assertRaises(ValueError):
            a.merge(c)  # id 4 twice: nothing is added
        self.assertEqual(len(a), 4)
        with self.assertRaises(ValueError):
            a.merge(accel.Index(self.ctx, bits=128))
        one = accel.Index(self.ctx)
        one.add(7, 5, labels="one label")
        self.assertEqual(one.entries()[2], ["one label"])

    # ---------------------------------------------------------------- arrays of other libraries

    def test_host_dlpack_arrays_come_back_as_their_kind(self):
        mask = self.rng.random((6, 7)) > 0.3
        got = self.ctx.ct.edt(FakeTensor(mask.astype(np.uint8)), sampling=0.5)
        self.assertIsInstance(got, FakeTensor)
        np.testing.assert_array_equal(got.numpy(), edt_brute(mask, 0.5).astype(np.float32))
        rgb = self.rng.integers(0, 256, (9, 8, 3), dtype=np.uint8)
        gray = self.ctx.to_gray(FakeTensor(rgb))
        self.assertIsInstance(gray, FakeTensor)
        np.testing.assert_array_equal(gray.numpy(), self.ctx.to_gray(rgb))
        r = self.ctx.hash.arrays(FakeTensor(rgb), kinds="ahash")
        self.assertEqual(r.hex(0, "ahash"), self.ctx.hash.arrays(rgb, kinds="ahash").hex(0, "ahash"))
        sky = self.ctx.svf.sky(FakeTensor(np.zeros((5, 5), np.float32)), 1.0)
        self.assertIsInstance(sky["svf"], FakeTensor)

    def test_version_and_typing_marker(self):
        self.assertEqual(accel.__version__, accel.version())
        self.assertTrue(os.path.exists(os.path.join(os.path.dirname(accel.__file__), "py.typed")))


if __name__ == "__main__":
    unittest.main(verbosity=2)
