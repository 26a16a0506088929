"""GPU arrays of CuPy and PyTorch given to the package on a machine with a CUDA
device (the GPU suite, make gpu-check): the results equal those of the same
data as numpy arrays, and come back as the input's kind of array on its
device. The CT stages with a GPU path use them in place (the byte counters
show no copy of them); svf stages them through the host. Skips where no
device is usable or neither library is installed."""
import sys
import unittest

from support import clean_environment, require

np = require("numpy")
import accel  # noqa: E402

clean_environment()


def optional(name):
    try:
        return __import__(name)
    except ImportError:
        return None


cupy = optional("cupy")
torch = optional("torch")
if not accel.backends()["cuda"]["available"]:
    print("SKIP: no usable CUDA device (%s)" % accel.backends()["cuda"]["reason"])
    sys.exit(77)
if cupy is None and (torch is None or not torch.cuda.is_available()):
    print("SKIP: neither CuPy nor PyTorch with CUDA is installed for %s" % sys.executable)
    sys.exit(77)


class GpuArrays(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ctx = accel.Context(backend="cuda")
        rng = np.random.default_rng(3)
        cls.mask = rng.random((20, 30, 25)) > 0.3
        cls.dsm = (rng.random((40, 50)) * 10).astype(np.float32)

    def in_place(self, stage):
        st = self.ctx.stats()[stage]
        self.assertEqual((st["gpu_runs"], st["fallbacks"]), (1, 0), stage)
        self.assertEqual((st["bytes_uploaded"], st["bytes_downloaded"]), (0, 0), stage)

    def check(self, to_device, kind, to_host):
        want = self.ctx.ct.edt(self.mask, sampling=(1, 2, 3))
        self.ctx.reset_stats()
        got = self.ctx.ct.edt(to_device(self.mask.astype(np.uint8)), sampling=(1, 2, 3))
        self.assertIsInstance(got, kind)
        np.testing.assert_array_equal(to_host(got), want)
        self.in_place("ct.edt")
        vol = (self.mask * 200).astype(np.uint8)
        solid = self.ctx.ct.threshold(to_device(vol), 100)
        self.assertIsInstance(solid, kind)
        np.testing.assert_array_equal(to_host(solid), vol > 100)
        self.in_place("ct.threshold")
        outputs = ("solid", "filled", "pores", "edt")
        ref = self.ctx.ct.pipeline(vol, 100, outputs=outputs)  # on the host, before the counters are read
        self.ctx.reset_stats()
        filled = self.ctx.ct.fill_holes(solid)
        np.testing.assert_array_equal(to_host(filled), ref["filled"])
        self.in_place("ct.fill_holes")
        res = self.ctx.ct.pipeline(to_device(vol), 100, outputs=outputs)
        for name in outputs:
            self.assertIsInstance(res[name], kind)
            np.testing.assert_array_equal(to_host(res[name]), ref[name], err_msg=name)
        self.in_place("ct.pipeline")
        sky = self.ctx.svf.sky(to_device(self.dsm), 1.0)
        self.assertIsInstance(sky["svf"], kind)
        np.testing.assert_array_equal(to_host(sky["svf"]), self.ctx.svf.sky(self.dsm, 1.0)["svf"])
        # the index: k nearest of device queries in place, range staged; results of their kind
        rng = np.random.default_rng(8)
        codes = rng.integers(0, 2**63, size=(2000, 2), dtype=np.uint64)
        cpu = accel.Context(backend="cpu")
        ix, ic = accel.Index(self.ctx, bits=64, nfields=2), accel.Index(cpu, bits=64, nfields=2)
        ix.add(np.arange(2000), codes)
        ic.add(np.arange(2000), codes)
        q = codes[::40] ^ np.uint64(3)
        self.ctx.reset_stats()
        ids, dist = ix.knn(to_device(q), 6, field=1)
        self.assertIsInstance(ids, kind)
        want = ic.knn(q, 6, field=1)
        np.testing.assert_array_equal(to_host(ids), want[0])
        np.testing.assert_array_equal(to_host(dist), want[1])
        st = self.ctx.stats()["index.knn"]
        self.assertEqual((st["gpu_runs"], st["fallbacks"]), (1, 0))
        got = ix.range(to_device(q), thresholds=3)
        self.assertIsInstance(got[0], kind)
        for g, w in zip(got, ic.range(q, thresholds=3)):
            np.testing.assert_array_equal(to_host(g), w)

    @unittest.skipIf(cupy is None, "CuPy is not installed")
    def test_cupy(self):
        self.check(cupy.asarray, cupy.ndarray, cupy.asnumpy)

    @unittest.skipIf(torch is None or not torch.cuda.is_available(), "PyTorch with CUDA is not installed")
    def test_torch(self):
        self.check(lambda a: torch.from_numpy(np.ascontiguousarray(a)).cuda(), torch.Tensor,
                   lambda t: t.cpu().numpy())


if __name__ == "__main__":
    unittest.main(verbosity=2)
