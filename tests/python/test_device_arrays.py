"""GPU arrays used in place, tested on the host: a context on the CUDA
backend's host emulation (ACCEL_CUDA_EMULATE=1, docs/backends.md), where
"device" memory is host memory, and a CuPy-like stand-in whose
``__cuda_array_interface__`` points at numpy memory. The CT stages with a
GPU path read and write such arrays in place (the byte counters show no copy
of them) and return the same kind of array; what cannot be taken in place
is staged through the host; a CPU context keeps the old rules."""
import os
import sys
import types
import unittest

from support import clean_environment, require

np = require("numpy")
import accel  # noqa: E402

clean_environment()

if not accel.backends()["cuda"]["compiled"]:
    print("SKIP: this libaccel is built without CUDA (no emulated CUDA backend)")
    sys.exit(77)


class FakeDevice:
    """CuPy's Device as a context manager; records that it was entered."""

    entered = 0

    def __enter__(self):
        FakeDevice.entered += 1
        return self

    def __exit__(self, *exc):
        return False


class FakeDeviceArray:
    """A CuPy-like device array whose memory is numpy's (the emulated GPU
    reads it as device memory): the CUDA array interface with its real
    pointer; .get() copies to numpy; its module's empty() and asarray()."""

    def __init__(self, a, strides=None, version=3, mask=None):
        self._a = a if isinstance(a, np.ndarray) else np.array(a)
        self.device = FakeDevice()
        self.__cuda_array_interface__ = {"shape": self._a.shape, "typestr": self._a.dtype.str,
                                         "data": (self._a.ctypes.data, False), "version": version,
                                         "strides": strides, "mask": mask, "stream": 1}

    def get(self):
        return self._a.copy()


class FakeGradTensor:
    """A PyTorch-like tensor that requires grad: its CUDA array interface
    refuses (RuntimeError), its detached view has one."""

    def __init__(self, a):
        self._inner = FakeDeviceArray(a)
        self.device = self._inner.device

    @property
    def __cuda_array_interface__(self):
        raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad")

    def detach(self):
        return self._inner


FakeGradTensor.__module__ = "fakedevlib"


class FakeDlpackDeviceArray:
    """A device array that speaks only DLPack, on device type 2 (kDLCUDA), its
    memory numpy's; its module allocates with empty()."""

    def __init__(self, a):
        self._a = a if isinstance(a, np.ndarray) else np.array(a)

    def __dlpack__(self, stream=None, **kwargs):
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return (2, 0)

    def get(self):
        return self._a.copy()


fake_dlpack_module = types.ModuleType("fakedlpacklib")
fake_dlpack_module.empty = lambda shape, dtype: FakeDlpackDeviceArray(np.empty(shape, dtype))
FakeDlpackDeviceArray.__module__ = "fakedlpacklib"
sys.modules["fakedlpacklib"] = fake_dlpack_module

fake_module = types.ModuleType("fakedevlib")


def fake_empty(shape, dtype):
    """Fresh "device" memory: garbage bytes, as a device's are."""
    a = np.empty(shape, dtype)
    a.reshape(-1).view(np.uint8)[:] = 0xA5
    return FakeDeviceArray(a)


fake_module.empty = fake_empty
fake_module.asarray = FakeDeviceArray
FakeDeviceArray.__module__ = "fakedevlib"
FakeDevice.__module__ = "fakedevlib"
sys.modules["fakedevlib"] = fake_module


def emulated_context(strict=True, **kwargs):
    """A context on the emulated CUDA backend."""
    os.environ["ACCEL_CUDA_EMULATE"] = "1"
    try:
        return accel.Context(backend="cuda", strict=strict, **kwargs)
    finally:
        del os.environ["ACCEL_CUDA_EMULATE"]


def volume(seed=5, shape=(9, 12, 14)):
    """Gray values with walls and closed pores (uint8)."""
    rng = np.random.default_rng(seed)
    v = np.where(rng.random(shape) > 0.9, 150, 20).astype(np.uint8)
    v[0], v[-1], v[:, 0], v[:, -1], v[:, :, 0], v[:, :, -1], v[:, :, 6] = 200, 200, 200, 200, 200, 200, 200
    return v


class DeviceArraysInPlace(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.gpu = emulated_context()
        cls.cpu = accel.Context(backend="cpu")
        cls.vol = volume()
        cls.solid = cls.vol > 100
        cls.filled = cls.cpu.ct.fill_holes(cls.solid)

    def setUp(self):
        self.gpu.reset_stats()

    def assert_no_copies(self, stage):
        st = self.gpu.stats()[stage]
        self.assertEqual((st["gpu_runs"], st["fallbacks"]), (1, 0), stage)
        self.assertEqual((st["bytes_uploaded"], st["bytes_downloaded"]), (0, 0), stage)

    def test_the_context_is_on_the_emulated_gpu(self):
        self.assertEqual(self.gpu.info()["backend"], "cuda")

    def test_threshold_in_place(self):
        for shape in ((9, 12, 14), (12, 14), (14,)):
            v = self.vol.reshape(-1)[:int(np.prod(shape))].reshape(shape)
            self.gpu.reset_stats()
            got = self.gpu.ct.threshold(FakeDeviceArray(v), 100)
            self.assertIsInstance(got, FakeDeviceArray)
            self.assertEqual(got._a.dtype, np.bool_)
            np.testing.assert_array_equal(got.get(), v > 100)  # numpy's comparison
            self.assert_no_copies("ct.threshold")
        got = self.gpu.ct.threshold(FakeDeviceArray(self.vol.astype(np.float32) - 50), 30.5, "<=")
        np.testing.assert_array_equal(got.get(), self.vol.astype(np.float32) - 50 <= 30.5)

    def test_fill_holes_and_edt_in_place(self):
        got = self.gpu.ct.fill_holes(FakeDeviceArray(self.solid))  # bool is taken as uint8
        self.assertIsInstance(got, FakeDeviceArray)
        np.testing.assert_array_equal(got.get(), self.filled)
        self.assert_no_copies("ct.fill_holes")
        pores = (self.filled & ~self.solid).astype(np.uint8)
        d = self.gpu.ct.edt(FakeDeviceArray(pores), sampling=(1.0, 2.0, 0.5))
        self.assertIsInstance(d, FakeDeviceArray)
        np.testing.assert_array_equal(d.get(), self.cpu.ct.edt(pores, sampling=(1.0, 2.0, 0.5)))
        self.assert_no_copies("ct.edt")
        self.assertGreater(float(d.get().max()), 1.0)
        self.assertGreater(FakeDevice.entered, 0)  # allocated under the input's device

    def test_pipeline_in_place(self):
        outputs = ("solid", "filled", "pores", "edt")
        got = self.gpu.ct.pipeline(FakeDeviceArray(self.vol), 100, outputs=outputs)
        want = self.cpu.ct.pipeline(self.vol, 100, outputs=outputs)
        for name in outputs:
            self.assertIsInstance(got[name], FakeDeviceArray, name)
            np.testing.assert_array_equal(got[name].get(), want[name], err_msg=name)
        self.assert_no_copies("ct.pipeline")
        got = self.gpu.ct.pipeline(FakeDeviceArray(self.vol), 100, outputs=("labels", "network"))
        want = self.cpu.ct.pipeline(self.vol, 100, outputs=("labels", "network"))
        np.testing.assert_array_equal(got["labels"].get(), want["labels"])
        self.assertEqual(got["marker_count"], want["marker_count"])
        self.assertEqual(len(got["network"]["regions"]), len(want["network"]["regions"]))
        given = FakeDeviceArray(want["labels"])
        again = self.gpu.ct.pipeline(FakeDeviceArray(self.vol), 100, markers=given, outputs=("labels",))
        np.testing.assert_array_equal(again["labels"].get(), want["labels"])

    def test_tensors_that_require_grad_in_place(self):
        got = self.gpu.ct.threshold(FakeGradTensor(self.vol), 100)
        self.assertIsInstance(got, FakeDeviceArray)
        np.testing.assert_array_equal(got.get(), self.vol > 100)
        self.assert_no_copies("ct.threshold")

    def test_dlpack_cuda_arrays_in_place(self):
        pores = (self.filled & ~self.solid).astype(np.uint8)
        d = self.gpu.ct.edt(FakeDlpackDeviceArray(pores))
        np.testing.assert_array_equal(d.get(), self.cpu.ct.edt(pores))
        self.assert_no_copies("ct.edt")

    def test_what_cannot_be_taken_in_place_is_not(self):
        # a dtype the stage converts, a strided or masked array, a version-1 interface: never
        # passed as device memory (these are staged, which needs a usable device: refused here)
        strided = np.zeros((9, 12, 28), np.uint8)[:, :, ::2]
        other_device = FakeDeviceArray(self.vol)
        other_device.device.id = self.gpu.info()["device"] + 1
        for obj in (FakeDeviceArray(self.vol.astype(np.int8)), FakeDeviceArray(strided, strides=strided.strides),
                    FakeDeviceArray(self.vol, mask=object()), FakeDeviceArray(self.vol, version=1), other_device):
            if accel.backends()["cuda"]["available"]:
                self.skipTest("a CUDA device is present: such arrays are staged there")
            with self.assertRaises(accel.DeviceArrayError):
                self.gpu.ct.threshold(obj, 100)
        self.assertNotIn("ct.threshold", self.gpu.stats())

    def test_a_failing_gpu_falls_back_with_copies(self):
        tiny = emulated_context(strict=False, memory_budget=1)  # every GPU stage fails for memory: the CPU reruns it
        pores = (self.filled & ~self.solid).astype(np.uint8)
        d = tiny.ct.edt(FakeDeviceArray(pores))
        np.testing.assert_array_equal(d.get(), self.cpu.ct.edt(pores))
        st = tiny.stats()["ct.edt"]
        self.assertEqual((st["fallbacks"], st["cpu_runs"]), (1, 1))
        # the mask came down for the CPU, the distances went up (the GPU found no room before copying)
        self.assertEqual((st["bytes_downloaded"], st["bytes_uploaded"]), (pores.size, pores.size * 4))
        del tiny

    def test_a_cpu_context_keeps_the_host_rules(self):
        if accel.backends()["cuda"]["available"]:
            self.skipTest("a CUDA device is present: GPU arrays are staged there")
        with self.assertRaises(accel.DeviceArrayError):
            self.cpu.ct.threshold(FakeDeviceArray(self.vol), 100)

    def test_hash_arrays_in_place(self):
        rng = np.random.default_rng(3)
        imgs = [rng.integers(0, 256, shape, dtype=np.uint8) for shape in ((40, 50), (41, 37, 2), (40, 50, 3),
                                                                           (33, 64, 4))]
        kinds = ("ahash", "dhash", "phash", "whash", "colorhash")
        want = self.cpu.hash.arrays(imgs, kinds=kinds)
        host = self.gpu.hash.arrays(imgs, kinds=kinds)
        up_host = self.gpu.stats()["hash.batch"]["bytes_uploaded"]
        self.gpu.reset_stats()
        got = self.gpu.hash.arrays([FakeDeviceArray(a) for a in imgs], kinds=kinds)
        st = self.gpu.stats()["hash.batch"]
        self.assertEqual((st["gpu_runs"], st["fallbacks"]), (1, 0))
        for k in kinds:
            for i in range(len(imgs)):
                self.assertEqual(got.hex(i, k), want.hex(i, k), (k, i))
                self.assertEqual(host.hex(i, k), want.hex(i, k), (k, i))
        # the device images' pixels (as L or RGB) were never uploaded
        self.assertLessEqual(st["bytes_uploaded"] + 40 * 50 + 41 * 37 + 40 * 50 * 3 + 33 * 64 * 3, up_host)
        one = self.gpu.hash.arrays(FakeDeviceArray(imgs[2]), kinds=kinds)  # one array is one image
        self.assertEqual(len(one), 1)
        self.assertEqual(one.hex(0, "phash"), want.hex(2, "phash"))

    def test_registration_in_place(self):
        yy, xx = np.mgrid[0:80, 0:88]
        fixed = (100 + 50 * np.sin(0.2 * xx) * np.cos(0.15 * yy)).astype(np.float32)
        moving = (100 + 50 * np.sin(0.2 * xx + 0.3) * np.cos(0.15 * yy - 0.2)).astype(np.uint8)
        opts = dict(levels=2, grid_spacing=32, iterations=8, samples=800)
        want = self.cpu.reg.register(fixed, moving, **opts)
        got = self.gpu.reg.register(FakeDeviceArray(fixed), FakeDeviceArray(moving), **opts)
        np.testing.assert_array_equal(got.parameters, want.parameters)  # the CPU's, to the bit
        st = self.gpu.stats()
        self.assertEqual((st["reg.check"]["gpu_runs"], st["reg.check"]["bytes_uploaded"]), (1, 0))
        # a linear warp of a device RGB layer: written in place on its device, the CPU's pixels
        rgb = np.stack([moving, moving // 2, 255 - moving], axis=2)
        self.gpu.reset_stats()
        warped = got.warp(FakeDeviceArray(rgb), interp="linear")  # got lives on the GPU context
        self.assertIsInstance(warped, FakeDeviceArray)
        np.testing.assert_array_equal(warped.get(), self.cpu.reg.warp(want, rgb, interp="linear"))
        self.assertEqual(self.gpu.stats()["reg.warp"]["bytes_downloaded"], 0)
        # cubic (the default): the coefficients made on the device, nothing of the layer on the bus
        self.gpu.reset_stats()
        warped = got.warp(FakeDeviceArray(rgb.astype(np.float32)))
        self.assertIsInstance(warped, FakeDeviceArray)
        np.testing.assert_allclose(warped.get(), self.cpu.reg.warp(want, rgb.astype(np.float32)), rtol=0, atol=1e-4)
        st = self.gpu.stats()["reg.warp"]
        self.assertEqual((st["gpu_runs"], st["bytes_downloaded"]), (1, 0))
        self.assertLess(st["bytes_uploaded"], rgb.size)

    def test_svf_in_place(self):
        rng = np.random.default_rng(8)
        dsm = (rng.random((21, 26)) * 3 - 1).astype(np.float32)
        dsm[4:8, 5:9] = 15.0
        cdsm = np.where(rng.random(dsm.shape) > 0.8, 5.0, 0.0).astype(np.float32)
        want = self.cpu.svf.sky(dsm, 1.0, cdsm=cdsm, matrices=True)
        got = self.gpu.svf.sky(FakeDeviceArray(dsm), 1.0, cdsm=FakeDeviceArray(cdsm), matrices=True)
        self.assertEqual(sorted(got), sorted(want))
        for k in want:
            self.assertIsInstance(got[k], FakeDeviceArray, k)
            np.testing.assert_array_equal(got[k].get(), want[k], err_msg=k)
        st = self.gpu.stats()["svf.sky"]
        self.assertEqual((st["gpu_runs"], st["fallbacks"]), (1, 0))
        down = st["bytes_downloaded"]
        # matrices a byte a patch, made by the library on the device: numpy's unpacking of the bits
        self.gpu.reset_stats()
        got = self.gpu.svf.sky(FakeDeviceArray(dsm), 1.0, cdsm=FakeDeviceArray(cdsm), matrices=True, unpack=True)
        for k in accel.SVF_MATRICES:
            self.assertIsInstance(got[k], FakeDeviceArray, k)
            np.testing.assert_array_equal(got[k].get(), np.unpackbits(want[k], axis=2, bitorder="little")[..., :153])
        st = self.gpu.stats()["svf.sky"]
        self.assertEqual((st["gpu_runs"], st["fallbacks"]), (1, 0))
        self.assertEqual(st["bytes_downloaded"], down)  # the matrices stay on the device, as the bit-packed ones
        sh = self.gpu.svf.shadows(FakeDeviceArray(dsm), 200.0, 35.0, 1.0)
        np.testing.assert_array_equal(sh["sh"].get(), self.cpu.svf.shadows(dsm, 200.0, 35.0, 1.0)["sh"])

    def test_knn_in_place(self):
        rng = np.random.default_rng(3)
        codes = rng.integers(0, 2**63, size=(500, 2, 2), dtype=np.uint64)  # two fields of 128 bits
        codes[250:] = codes[:250] ^ np.uint64(1 << 40)  # near twins: ties and small distances
        ids = np.arange(500, dtype=np.uint64) * 7 + 3
        q = codes[::10].copy()
        q[:, 1, 0] ^= np.uint64(5)
        cpu_ix, gpu_ix = accel.Index(self.cpu, bits=128, nfields=2), accel.Index(self.gpu, bits=128, nfields=2)
        cpu_ix.add(ids, codes)
        gpu_ix.add(ids, codes)
        want = cpu_ix.knn(q, 5, field=1)
        for wrap, shaped in ((FakeDeviceArray, q), (FakeDlpackDeviceArray, q.reshape(50, 4))):
            self.gpu.reset_stats()
            got = gpu_ix.knn(wrap(shaped), 5, field=1)
            self.assertIsInstance(got[0], wrap)
            np.testing.assert_array_equal(got[0].get(), want[0])
            np.testing.assert_array_equal(got[1].get(), want[1])
            st = self.gpu.stats()["index.knn"]
            self.assertEqual((st["gpu_runs"], st["fallbacks"]), (1, 0))
            # up: field 1's codes, the candidate lists' offsets, the results; never the queries
            self.assertEqual(st["bytes_uploaded"], 500 * 2 * 8 + 50 * 8 + 50 * 5 * 12)
        if not accel.backends()["cuda"]["available"]:  # int64 queries would be staged: that needs a real device
            with self.assertRaises(accel.DeviceArrayError):
                gpu_ix.knn(FakeDeviceArray(q.astype(np.int64)), 5, field=1)
        with self.assertRaises(ValueError):
            gpu_ix.knn(FakeDeviceArray(q.reshape(50, 4)[:, :3].copy()), 5)  # 3 words an entry, not 4
        with self.assertRaises(ValueError):
            gpu_ix.knn(FakeDeviceArray(q), 0)

    def test_other_stages_stage_or_refuse(self):
        # the watershed has no device path: the array goes through the host rules
        if accel.backends()["cuda"]["available"]:
            self.skipTest("a CUDA device is present: GPU arrays are staged there")
        with self.assertRaises(accel.DeviceArrayError):
            self.gpu.ct.watershed(FakeDeviceArray(np.zeros((8, 8), np.float32)))


if __name__ == "__main__":
    unittest.main(verbosity=2)
