"""ctx.reg and accel.Transform against independent numpy evaluations: the
elastix grid layout, the cubic B-spline transform (points and fields, with
initial parts), warps (identity, whole-pixel shifts, bilinear, and cubic
B-spline interpolation, which reproduces cubic polynomials exactly away from
the borders), saved and loaded files, elastix's own transform against
transformix's field (../shared/data/reg), and registrations of synthetic
pairs with a known deformation."""
import math
import os
import pathlib
import shutil
import tempfile
import unittest

from support import SRC, clean_environment, require

np = require("numpy")
import accel  # noqa: E402

clean_environment()

SHARED_REG = os.path.join(SRC, "..", "shared", "data", "reg")


def beta3(x):
    """The centred cubic B-spline."""
    x = np.abs(x)
    return np.where(x < 1, 2.0 / 3.0 - x * x + x ** 3 / 2.0, np.where(x < 2, (2.0 - x) ** 3 / 6.0, 0.0))


def grid_of(width, height, spacing):
    """elastix's grid for a fixed image of width x height (include/accel/reg.h)."""
    size = [math.ceil((n - 1) / spacing) + 3 for n in (width, height)]
    origin = [-((s - 1) * spacing - (n - 1)) / 2.0 for s, n in zip(size, (width, height))]
    return size, origin


def reference_points(t, xy, linear=None):
    """T(p) = B(L(p)) in numpy: L(p) = A p + b (2x2, 2), then the B-spline sum
    over the 4 x 4 nodes of the support, nothing where a node is missing."""
    g = t.grid
    (nx, ny), (ox, oy), (sx, sy) = g["size"], g["origin"], g["spacing"]
    c = t.parameters
    cx, cy = c[:nx * ny].reshape(ny, nx), c[nx * ny:].reshape(ny, nx)
    p = np.asarray(xy, np.float64).reshape(-1, 2)
    q = p if linear is None else p @ linear[0].T + linear[1]
    out = q.copy()
    for k, (x, y) in enumerate(q):
        gx, gy = (x - ox) / sx, (y - oy) / sy
        if not (1 <= gx < nx - 2 and 1 <= gy < ny - 2):
            continue
        i0, j0 = int(math.floor(gx)) - 1, int(math.floor(gy)) - 1
        w = np.outer(beta3(gy - np.arange(j0, j0 + 4)), beta3(gx - np.arange(i0, i0 + 4)))
        out[k, 0] += np.sum(w * cx[j0:j0 + 4, i0:i0 + 4])
        out[k, 1] += np.sum(w * cy[j0:j0 + 4, i0:i0 + 4])
    return out.reshape(np.shape(xy))


def affine_about(a, t, centre):
    """q = A (p - c) + c + t as (A, b)."""
    a = np.asarray(a, np.float64).reshape(2, 2)
    c = np.asarray(centre, np.float64)
    return a, c + np.asarray(t, np.float64) - a @ c


def texture(h, w, x=None, y=None):
    """A smooth scene, a sum of sinusoids, at (x, y) (default: the pixel grid)."""
    if x is None:
        y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    return (100 + 40 * np.sin(x / 7.0) * np.cos(y / 9.0) + 30 * np.sin((x + 2 * y) / 13.0)
            + 20 * np.cos((3 * x - y) / 17.0))


def shifted_pair(h, w, ctx, spacing, seed):
    """(fixed, moving, truth): fixed(p) = moving(T(p)) exactly, moving = the
    scene on its pixels, T = a smooth B-spline (amplitude ~2 px) plus a
    translation; truth = T(p) - p as (2, h, w), by the numpy reference."""
    rng = np.random.default_rng(seed)
    truth_t = accel.Transform((h, w), spacing, ctx=ctx)
    n = truth_t.parameters.size
    truth_t.parameters = rng.uniform(-2.0, 2.0, n)
    shift = np.array([1.25, -0.75])
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    p = np.stack([x.ravel(), y.ravel()], axis=1)
    q = reference_points(truth_t, p, (np.eye(2), shift))
    fixed = texture(h, w, q[:, 0].reshape(h, w), q[:, 1].reshape(h, w)).astype(np.float32)
    moving = texture(h, w).astype(np.float32)
    truth = (q - p).T.reshape(2, h, w)
    return fixed, moving, truth


class OnCpu(unittest.TestCase):
    """A test class with one CPU context, self.ctx."""

    @classmethod
    def setUpClass(cls):
        cls.ctx = accel.Context(backend="cpu")

    @classmethod
    def tearDownClass(cls):
        cls.ctx.close()


class Transform(OnCpu):
    def random_transform(self, shape=(90, 130), spacing=24.0, seed=0):
        rng = np.random.default_rng(seed)
        t = accel.Transform(shape, spacing, ctx=self.ctx)
        t.parameters = rng.normal(0, 3, t.parameters.size)
        return t, rng

    def test_grid_is_elastix_layout(self):
        for (h, w, s) in ((90, 130, 24.0), (512, 512, 64.0), (2, 7, 3.0), (300, 200, 17.5)):
            t = accel.Transform((h, w), s, ctx=self.ctx)
            size, origin = grid_of(w, h, s)
            g = t.grid
            self.assertEqual(g["image_size"], (w, h))
            self.assertEqual(g["size"], tuple(size))
            self.assertEqual(g["spacing"], (s, s))
            np.testing.assert_allclose(g["origin"], origin, rtol=0, atol=1e-12)
            self.assertEqual(t.parameters.size, 2 * size[0] * size[1])
            self.assertTrue(np.all(t.parameters == 0))
            self.assertEqual(t.shape, (h, w))

    def test_points_match_numpy_bspline(self):
        t, rng = self.random_transform()
        xy = np.concatenate([rng.uniform(-40, 170, (200, 2)), [[0, 0], [129, 89], [64.5, 44.25]]])
        np.testing.assert_allclose(t.points(xy), reference_points(t, xy), rtol=0, atol=1e-10)
        # with each kind of initial part, composed as elastix's "Compose": B(L(p))
        for kind, params, centre, lin in (
                ("translation", [3.5, -2.0], (0, 0), (np.eye(2), np.array([3.5, -2.0]))),
                ("rigid", [0.2, 1.0, -3.0], (64.5, 44.5),
                 affine_about([[math.cos(0.2), -math.sin(0.2)], [math.sin(0.2), math.cos(0.2)]], [1.0, -3.0],
                              (64.5, 44.5))),
                ("affine", [1.02, 0.05, -0.03, 0.97, -2.0, 4.0], (60, 40),
                 affine_about([[1.02, 0.05], [-0.03, 0.97]], [-2.0, 4.0], (60, 40)))):
            t.set_initial(kind, params, centre)
            got_kind, got_params, got_centre = t.initial
            self.assertEqual(got_kind, kind)
            np.testing.assert_array_equal(got_params, params)
            np.testing.assert_allclose(t.points(xy), reference_points(t, xy, lin), rtol=0, atol=1e-10, err_msg=kind)

    def test_field_is_displacement_on_pixels(self):
        t, _ = self.random_transform(shape=(40, 50), spacing=12.0, seed=3)
        t.set_initial("affine", [1.01, 0.02, -0.02, 0.99, 1.5, -0.5], (25, 20))
        lin = affine_about([[1.01, 0.02], [-0.02, 0.99]], [1.5, -0.5], (25, 20))
        u = t.field()
        self.assertEqual((u.dtype, u.shape), (np.float32, (2, 40, 50)))
        y, x = np.mgrid[0:40, 0:50].astype(np.float64)
        p = np.stack([x.ravel(), y.ravel()], axis=1)
        ref = (reference_points(t, p, lin) - p).T.reshape(2, 40, 50)
        np.testing.assert_allclose(u, ref, rtol=0, atol=2e-5)
        # a region, also beyond the image
        r = t.field((-5, 30, 17, 20))
        y, x = np.mgrid[30:50, -5:12].astype(np.float64)
        p = np.stack([x.ravel(), y.ravel()], axis=1)
        ref = (reference_points(t, p, lin) - p).T.reshape(2, 20, 17)
        np.testing.assert_allclose(r, ref, rtol=0, atol=2e-5)

    def test_parameters_and_copy(self):
        t, _ = self.random_transform()
        c = t.copy()
        np.testing.assert_array_equal(c.parameters, t.parameters)
        c.parameters = np.zeros(t.parameters.size)
        self.assertTrue(np.any(t.parameters != 0))
        with self.assertRaises(ValueError):
            t.parameters = np.zeros(3)
        with self.assertRaises(ValueError):
            t.parameters = np.full(t.parameters.size, np.nan)
        with self.assertRaises(ValueError):
            t.set_initial("shear", [1])
        with self.assertRaises(ValueError):
            t.set_initial("rigid", [1, 2])
        with self.assertRaises(accel.AccelError):  # singular
            t.set_initial("affine", [1, 2, 2, 4, 0, 0])


class Warp(OnCpu):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.img = np.random.default_rng(7).uniform(0, 255, (48, 64)).astype(np.float32)

    def shift(self, tx, ty, shape=(48, 64)):
        t = accel.Transform(shape, 16.0, ctx=self.ctx)
        t.set_initial("translation", [tx, ty])
        return t

    def test_identity(self):
        t = accel.Transform((48, 64), 16.0, ctx=self.ctx)
        for interp in ("linear", "cubic"):
            np.testing.assert_allclose(t.warp(self.img, interp=interp), self.img, rtol=0, atol=1e-3)
        u8 = self.img.astype(np.uint8)
        out = t.warp(u8)
        self.assertEqual(out.dtype, np.uint8)
        np.testing.assert_array_equal(out, u8)

    def test_whole_pixel_shift_and_fill(self):
        t = self.shift(3, -2)
        for interp in ("linear", "cubic"):
            out = t.warp(self.img, interp=interp, fill=-7.0)
            # out(r, c) = img(r - 2, c + 3) where that is inside, the fill elsewhere
            np.testing.assert_allclose(out[2:, :61], self.img[:46, 3:], rtol=0, atol=1e-3, err_msg=interp)
            self.assertTrue(np.all(out[:2, :] == -7.0))
            self.assertTrue(np.all(out[:, 61:] == -7.0))

    def test_bilinear(self):
        t = self.shift(0.3, -0.6)
        out = t.warp(self.img, interp="linear")
        y, x = np.mgrid[1:47, 0:63].astype(np.float64)
        qx, qy = x + 0.3, y - 0.6
        x0, y0 = np.floor(qx).astype(int), np.floor(qy).astype(int)
        fx, fy = qx - x0, qy - y0
        a = self.img.astype(np.float64)
        ref = ((1 - fy) * ((1 - fx) * a[y0, x0] + fx * a[y0, x0 + 1]) +
               fy * ((1 - fx) * a[y0 + 1, x0] + fx * a[y0 + 1, x0 + 1]))
        np.testing.assert_allclose(out[1:47, 0:63], ref, rtol=0, atol=1e-3)

    def test_cubic_reproduces_cubic_polynomials(self):
        h, w = 80, 96
        y, x = np.mgrid[0:h, 0:w].astype(np.float64)

        def poly(x, y):
            x, y = x / 50.0, y / 50.0
            return 10 + 5 * x - 3 * y + 2 * x * y + 4 * x ** 2 - y ** 3 + 1.5 * x ** 3 + x * x * y

        t = self.shift(0.37, -1.71, (h, w))
        out = t.warp(poly(x, y).astype(np.float32), interp="cubic")
        ref = poly(x + 0.37, y - 1.71)
        m = 24  # the mirror boundary's influence decays as 0.268^distance
        np.testing.assert_allclose(out[m:h - m, m:w - m], ref[m:h - m, m:w - m], rtol=0, atol=1e-4)

    def test_channels_dtypes_region_and_batch(self):
        t = self.shift(1.5, 0.25)
        rgb = np.random.default_rng(1).integers(0, 256, (48, 64, 3)).astype(np.uint8)
        u16 = (self.img * 200).astype(np.uint16)
        outs = t.warp([rgb, u16, self.img])
        self.assertEqual([o.dtype for o in outs], [np.uint8, np.uint16, np.float32])
        self.assertEqual(outs[0].shape, (48, 64, 3))
        for c in range(3):
            np.testing.assert_array_equal(outs[0][..., c], t.warp(np.ascontiguousarray(rgb[..., c])))
        # integers: the float result rounded to nearest and clamped (float32 ties aside: within 1)
        ref = np.clip(np.floor(t.warp(u16.astype(np.float32)).astype(np.float64) + 0.5), 0, 65535)
        self.assertLessEqual(np.abs(outs[1].astype(np.float64) - ref).max(), 1.0)
        part = t.warp(self.img, region=(10, 5, 20, 30))
        np.testing.assert_array_equal(part, outs[2][5:35, 10:30])
        # the moving image may have any size: a larger input, the same grid (the cubic prefilter sees the
        # padding, whose influence decays as 0.268^distance: compared 12 pixels away from it)
        big = np.pad(self.img, ((0, 20), (0, 30)))
        np.testing.assert_allclose(t.warp(big)[:36, :50], outs[2][:36, :50], rtol=0, atol=1e-2)
        self.assertEqual(t.warp(big, interp="linear")[:47, :62].tolist(),
                         t.warp(self.img, interp="linear")[:47, :62].tolist())

    def test_other_floats_warp_as_float32(self):
        # float64 and float16 layers (numpy's default and a compact one) were refused; they are warped
        # as float32, as accel warp converts them, and come back in their own dtype
        t = self.shift(1.5, 0.25)
        ref = t.warp(self.img)
        for dtype in (np.float64, np.float16, np.dtype(">f4")):
            a = self.img.astype(dtype)
            out = t.warp(a)
            self.assertEqual(out.dtype, dtype)
            np.testing.assert_array_equal(out, t.warp(a.astype(np.float32)).astype(dtype))
        np.testing.assert_array_equal(t.warp(self.img.astype(np.float64)), ref.astype(np.float64))

    def test_empty_and_bad_regions(self):
        # an empty region is an empty field and an empty warp (the warp was an error)
        t = self.shift(1.5, 0.25)
        self.assertEqual(t.field((3, 4, 0, 5)).shape, (2, 5, 0))
        rgb = np.zeros((48, 64, 3), np.uint8)
        outs = t.warp([self.img, rgb], region=(3, 4, 0, 5))
        self.assertEqual([o.shape for o in outs], [(5, 0), (5, 0, 3)])
        self.assertEqual(t.warp(self.img, region=(3, 4, 7, 0), interp="linear").shape, (0, 7))
        for bad in ((0, 0, 1.5, 4), (0, 0, "4", 4)):
            with self.assertRaises(TypeError):
                t.field(bad)
        with self.assertRaises(ValueError):
            t.warp(self.img, region=(0, 0, 4))
        with self.assertRaises(ValueError):
            t.field((0, 0, -1, 4))

    def test_bad_inputs(self):
        t = self.shift(1, 1)
        with self.assertRaises(accel.AccelError):
            t.warp(np.zeros((8, 8), np.int32))
        with self.assertRaises(accel.AccelError):
            t.warp(np.zeros((8, 8, 2), np.uint8))
        with self.assertRaises(ValueError):
            t.warp(self.img, interp="nearest")
        self.assertEqual(t.warp([]), [])


class Files(OnCpu):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.tmp = tempfile.mkdtemp(prefix="accel-reg-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)
        super().tearDownClass()

    def test_save_load_round_trip(self):
        rng = np.random.default_rng(5)
        for initial in (None, ("translation", [2.5, -1.0], (0, 0)), ("rigid", [0.05, 1.0, 2.0], (40.0, 30.0)),
                        ("affine", [1.01, 0.02, -0.01, 0.98, 3.0, -2.0], (39.5, 29.5))):
            t = accel.Transform((60, 80), 20.0, ctx=self.ctx)
            t.parameters = rng.normal(0, 2, t.parameters.size)
            if initial:
                t.set_initial(*initial)
            path = os.path.join(self.tmp, "t.txt")
            t.save(path)
            u = accel.Transform.load(path, self.ctx)
            self.assertEqual(u.grid, t.grid)
            np.testing.assert_allclose(u.parameters, t.parameters, rtol=1e-12, atol=1e-12)
            xy = rng.uniform(-10, 90, (50, 2))
            np.testing.assert_allclose(u.points(xy), t.points(xy), rtol=0, atol=1e-9, err_msg=str(initial))
            with open(path) as f:
                text = f.read()
            self.assertIn('(Transform "BSplineTransform")', text)
        # a path that cannot be written fails before the initial part's file is made (it was left behind)
        for bad in ("isdir.txt", os.path.join("missing", "t.txt")):
            if bad == "isdir.txt":
                os.mkdir(os.path.join(self.tmp, bad))
            with self.assertRaises(accel.AccelError):
                t.save(os.path.join(self.tmp, bad))
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "isdir.initial.txt")))
        # a centre of other than 2 values and an RGB shape are refused (a 1-value centre was (x, 0))
        for bad in (lambda: t.set_initial("translation", (1.0, 1.0), (1.0,)), lambda: accel.Transform((60, 80, 3)),
                    lambda: t.set_initial("translation", (1.0, 1.0), (1.0, 2.0, 3.0))):
            with self.assertRaises(ValueError):
                bad()
        with self.assertRaises(TypeError):
            accel.Transform((60.5, 80))
        for bad in (["1"] * t.parameters.size, t.parameters.astype(np.complex128)):
            with self.assertRaises(TypeError):
                t.parameters = bad

    def test_elastix_transform_against_transformix(self):
        case = os.path.join(SHARED_REG, "tex_512_s1")
        if not os.path.isdir(case):
            self.skipTest("../shared/data/reg is absent")
        t = self.ctx.reg.load(os.path.join(case, "TransformParameters.0.txt"))
        u = t.field()
        self.assertEqual(u.shape, (2, 512, 512))
        dx, dy = np.load(os.path.join(case, "elastix_dx.npy")), np.load(os.path.join(case, "elastix_dy.npy"))
        np.testing.assert_allclose(u[0], dx, rtol=0, atol=1e-3)
        np.testing.assert_allclose(u[1], dy, rtol=0, atol=1e-3)


class Register(OnCpu):
    def check_recovered(self, t, truth, border, mean_max, p95_max):
        u = t.field()
        err = np.hypot(*(u - truth))[border:-border, border:-border]
        before = np.hypot(*truth)[border:-border, border:-border]
        self.assertLess(err.mean(), mean_max, "error mean %.3f px (displacement mean %.3f px)"
                        % (err.mean(), before.mean()))
        self.assertLess(np.percentile(err, 95), p95_max)

    def test_progress_true_fills_the_whole_registration(self):
        from unittest import mock
        from accel import _progress
        fixed, moving, _ = shifted_pair(128, 128, self.ctx, 64.0, 11)
        seen = []
        with mock.patch.object(_progress._Bar, "__call__", lambda bar, stage, fraction: seen.append((stage, fraction))
                               and False):
            t = self.ctx.reg.register(fixed, moving, grid_spacing=32, levels=3, iterations=100, samples=3000, seed=3,
                                      progress=True)
        self.assertEqual({s for s, _ in seen}, {"reg level 1/3", "reg level 2/3", "reg level 3/3"})
        fractions = [f for _, f in seen]
        self.assertEqual(fractions, sorted(fractions))  # never goes back
        self.assertTrue(all(0 <= f <= 1 for f in fractions))
        # a level's share starts where the one before it ends, whatever its iterations
        for level in range(3):
            first = next(f for s, f in seen if s == "reg level %d/3" % (level + 1))
            self.assertAlmostEqual(first, level / 3, delta=1 / 300 + 1e-12)
        self.assertLess(max(t.report["levels"][k]["iterations"] for k in range(3)), 100)

    def test_recovers_a_known_deformation(self):
        fixed, moving, truth = shifted_pair(128, 128, self.ctx, 64.0, 11)
        calls = []
        t = self.ctx.reg.register(fixed, moving, grid_spacing=32, levels=3, iterations=100, samples=3000, seed=3,
                                  progress=lambda level, it, metric: calls.append((level, it, metric)) and None)
        self.assertEqual(t.shape, (128, 128))
        self.assertEqual(t.grid["spacing"], (32.0, 32.0))
        self.check_recovered(t, truth, 16, 0.1, 0.3)
        rep = t.report
        self.assertEqual(len(rep["levels"]), 3)
        self.assertEqual(sorted({c[0] for c in calls}), [0, 1, 2])
        for lv in rep["levels"]:
            self.assertIn(lv["stop"], ("iterations", "converged", "stalled"))
            self.assertTrue(1 <= lv["iterations"] <= 100)
        self.assertLess(rep["metric"], rep["levels"][0]["metric_first"])
        # the same seed gives the same transform
        again = self.ctx.reg.register(fixed, moving, grid_spacing=32, levels=3, iterations=100, samples=3000, seed=3)
        np.testing.assert_array_equal(again.parameters, t.parameters)
        # warping the moving image with it reproduces the fixed image inside
        w = t.warp(moving)
        inner = slice(16, -16)
        self.assertLess(np.abs(w - fixed)[inner, inner].mean(), 0.1 * np.abs(moving - fixed)[inner, inner].mean())

    def test_initial_from_a_file_and_on_another_grid(self):
        fixed, moving, truth = shifted_pair(96, 96, self.ctx, 48.0, 2)
        t = self.ctx.reg.register(fixed, moving, grid_spacing=48, levels=2, iterations=30)
        path = os.path.join(tempfile.mkdtemp(prefix="accel-reg-"), "T.txt")
        t.save(path)
        # a path reads the file (it was AttributeError: 'str' object has no attribute 'handle')
        for given in (path, pathlib.Path(path), t):
            t2 = self.ctx.reg.register(fixed, moving, grid_spacing=48, levels=1, iterations=1, initial=given)
            self.assertEqual(t2.shape, t.shape)
        with self.assertRaises(TypeError):
            self.ctx.reg.register(fixed, moving, initial=3)
        # a B-spline part on another grid than the final one is refused (it was dropped without a word)
        with self.assertRaises(ValueError) as e:
            self.ctx.reg.register(fixed, moving, grid_spacing=24, levels=1, iterations=1, initial=path)
        self.assertIn("another grid", str(e.exception))
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)

    def test_inputs_options_and_cancel(self):
        fixed, moving, truth = shifted_pair(96, 96, self.ctx, 48.0, 2)
        # uint8 and RGB inputs are accepted: RGB as elastix's gray
        rgb = np.repeat(np.clip(moving, 0, 255).astype(np.uint8)[..., None], 3, axis=2)
        t = self.ctx.reg.register(np.clip(fixed, 0, 255).astype(np.uint8), rgb, grid_spacing=48, levels=2,
                                  iterations=50, metric="ncc", mask=np.ones(fixed.shape, bool))
        self.assertEqual(t.grid["spacing"], (48.0, 48.0))
        gray = accel.reg.registration_image(np.array([[[10, 20, 30, 255]]], np.uint8))
        self.assertEqual(gray.dtype, np.float32)
        self.assertAlmostEqual(float(gray[0, 0]), (2125 * 10 + 7154 * 20 + 721 * 30) / 10000, places=4)
        with self.assertRaises(TypeError):
            self.ctx.reg.register(fixed, moving, gridspacing=3)
        with self.assertRaises(ValueError):
            self.ctx.reg.register(fixed, moving, metric="mi")
        with self.assertRaises(ValueError):
            self.ctx.reg.register(fixed, moving, preset="ants")
        with self.assertRaises(accel.AccelError) as e:
            self.ctx.reg.register(fixed, moving, levels=9)
        self.assertEqual(e.exception.name, "ACCEL_ERR_INVALID_ARG")
        with self.assertRaises(accel.AccelError) as e:
            self.ctx.reg.register(fixed, moving, progress=lambda *a: True)
        self.assertEqual(e.exception.name, "ACCEL_ERR_CANCELLED")
        o = accel.Reg.options("elastix", levels=2, metric="ncc")
        self.assertEqual((o.levels, o.metric, o.optimizer, o.downsample, o.tolerance), (2, 1, 1, 0, 0.0))
        # integers their C fields cannot hold are refused, not wrapped (levels=2**32 + 4 ran 4 levels)
        for bad in (dict(levels=2 ** 32 + 4), dict(iterations=2 ** 32 + 3), dict(seed=2 ** 64), dict(seed=-1),
                    dict(samples=2 ** 63), dict(levels=2.5), dict(window=float("nan"))):
            with self.assertRaises(ValueError, msg=bad):
                accel.Reg.options(**bad)
        with self.assertRaises(TypeError):
            accel.Reg.options(levels="3")
        with self.assertRaises(TypeError):  # was a ComplexWarning and the real part
            self.ctx.reg.register(fixed.astype(np.complex64), moving)
        with self.assertRaises(TypeError) as e:
            self.ctx.reg.register(fixed, moving, progress=3)
        self.assertIn("callable(level, iteration, metric)", str(e.exception))
        o = accel.Reg.options(seed=2 ** 64 - 1, samples=np.int64(7000), levels=3.0, renew_samples=False)
        self.assertEqual((o.seed, o.samples, o.levels, o.renew_samples), (2 ** 64 - 1, 7000, 3, 0))
        o = accel.Reg.options(seed=np.uint64(2 ** 64 - 1), levels=np.array(2), renew_samples=np.True_,
                              iterations=np.float32(9))
        self.assertEqual((o.seed, o.levels, o.renew_samples, o.iterations), (2 ** 64 - 1, 2, 1, 9))


if __name__ == "__main__":
    unittest.main(verbosity=2)
