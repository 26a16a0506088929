"""B-spline registration of 2-D images and warping with the result, elastix's
model and files (include/accel/reg.h, docs/reg.md): ctx.reg and Transform.

    with accel.Context() as ctx:
        t = ctx.reg.register(fixed, moving, grid_spacing=64, metric="mse")
        warped = t.warp(moving)              # moving(T(p)) on the fixed grid
        u = t.field()                        # float32 (2, H, W): u_x, u_y
        t.save("TransformParameters.txt")    # transformix reads it

Coordinates are elastix's: x = column, y = row, pixel centres at integers; T
maps a point of the fixed image into the moving image, T(p) = p + u(p).
"""
import ctypes
import numbers
import operator
import os
from typing import Any, Dict, Optional, Sequence, Tuple, Union

from ._arrays import Array, DeviceView, as_array, device_empty, device_in, host, host_only, ref
from ._errors import ContextCalls, check
from ._native import P, Handle, c_status, c_struct, declare, lib
from ._progress import Call, ProgressArg

REG_PROGRESS_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32, ctypes.c_double)

METRICS = {"mse": 0, "ncc": 1}
OPTIMIZERS = {"gauss-newton": 0, "asgd": 1}
PREALIGN = {"none": 0, "translation": 1, "rigid": 2}
INTERPS = {"linear": 1, "cubic": 3}
STOPS = {0: "iterations", 1: "converged", 2: "stalled"}
LINEAR_KINDS = {"none": 0, "translation": 1, "rigid": 2, "affine": 3}
LINEAR_NAMES = {v: k for k, v in LINEAR_KINDS.items()}
LINEAR_COUNTS = {"none": 0, "translation": 2, "rigid": 3, "affine": 6}

RegGrid = c_struct("accel_reg_grid", """
    int64_t image_size[2]; int64_t size[2]; double spacing[2]; double origin[2];""")
RegOptions = c_struct("accel_reg_options", """
    uint32_t struct_size; int32_t levels; double grid_spacing; int32_t downsample; int32_t iterations;
    int64_t samples; int32_t renew_samples; uint64_t seed; accel_reg_metric metric; accel_reg_optimizer optimizer;
    double bending_weight; double tolerance; int32_t window; int64_t validation_samples; int32_t prealign;
    accel_reg_progress_fn progress; void *progress_user;""", accel_reg_progress_fn=REG_PROGRESS_FN)
RegLevelReport = c_struct("accel_reg_level_report", """
    int32_t iterations; int32_t stop; int64_t samples; int64_t width, height; double grid_spacing;
    double metric_first, metric_last; double seconds;""")
RegReport = c_struct("accel_reg_report", """
    uint32_t struct_size; int32_t levels; accel_reg_level_report level[8]; double seconds;""",
                     accel_reg_level_report=RegLevelReport)
RegWarpOptions = c_struct("accel_reg_warp_options", """
    uint32_t struct_size; accel_reg_interp interp; double fill; int64_t x0, y0; int64_t tile;
    accel_progress_fn progress; void *progress_user;""")

_V, _D, _I64 = ctypes.c_void_p, ctypes.c_double, ctypes.c_int64
declare({
    "accel_reg_grid_for": (c_status, [_I64, _I64, _D, P(RegGrid)]),
    "accel_reg_transform_create": (c_status, [_V, P(RegGrid), P(_V)]),
    "accel_reg_transform_set_initial": (c_status, [_V, _V, ctypes.c_int, P(_D), P(_D)]),
    "accel_reg_transform_initial": (c_status, [_V, P(ctypes.c_int), P(_D), P(_D)]),
    "accel_reg_transform_grid": (c_status, [_V, P(RegGrid)]),
    "accel_reg_transform_count": (_I64, [_V]),
    "accel_reg_transform_parameters": (c_status, [_V, P(_D), _I64]),
    "accel_reg_transform_set_parameters": (c_status, [_V, P(_D), _I64]),
    "accel_reg_transform_points": (c_status, [_V, _V, P(_D), _I64]),
    "accel_reg_transform_field": (c_status, [_V, _V, _I64, _I64, P(Array)]),
    "accel_reg_transform_clone": (c_status, [_V, _V, P(_V)]),
    "accel_reg_transform_save": (c_status, [_V, _V, ctypes.c_char_p]),
    "accel_reg_transform_load": (c_status, [_V, ctypes.c_char_p, P(_V)]),
    "accel_reg_transform_destroy": (None, [_V]),
    "accel_reg_options_init": (c_status, [P(RegOptions), ctypes.c_size_t]),
    "accel_reg_options_preset": (c_status, [P(RegOptions), ctypes.c_char_p]),
    "accel_reg_levels_for": (ctypes.c_int32, [P(RegOptions), _I64, _I64]),
    "accel_reg_report_init": (c_status, [P(RegReport), ctypes.c_size_t]),
    "accel_reg_register": (c_status, [_V, P(Array), P(Array), P(Array), _V, P(RegOptions), P(_V), P(RegReport)]),
    "accel_reg_warp_options_init": (c_status, [P(RegWarpOptions), ctypes.c_size_t]),
    "accel_reg_warp": (c_status, [_V, _V, P(P(Array)), P(P(Array)), ctypes.c_int32, P(RegWarpOptions)]),
})

# The options register() takes by name (accel_reg_options' fields) and how
# each is converted; names given as strings are looked up in their table.
_OPTIONS: Dict[str, Any] = {
    "levels": int, "grid_spacing": float, "downsample": int, "iterations": int, "samples": int,
    "renew_samples": int, "seed": int, "metric": METRICS, "optimizer": OPTIMIZERS, "bending_weight": float,
    "tolerance": float, "window": int, "validation_samples": int, "prealign": PREALIGN}


def _integer(name, value):
    """value for the integer field `name` of accel_reg_options: a whole number
    that its C type holds (a larger one would wrap: levels=2**32 + 4 ran four
    levels, seed=2**64 seed 0), else ValueError (TypeError for a non-number)."""
    ctype = dict(RegOptions._fields_)[name]
    bits = 8 * ctypes.sizeof(ctype)
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if ctype(-1).value < 0 else (0, (1 << bits) - 1)
    try:
        v = operator.index(value)  # int, bool, numpy integers and bool_, 0-d integer arrays
    except TypeError:
        if not isinstance(value, numbers.Number) or (isinstance(value, numbers.Complex) and
                                                     not isinstance(value, numbers.Real)):
            raise TypeError("%s must be an integer, not %r" % (name, value)) from None
        if value != value or value in (float("inf"), float("-inf")) or int(value) != value:
            raise ValueError("%s must be a whole number, not %r" % (name, value)) from None
        v = int(value)
    if not lo <= v <= hi:
        raise ValueError("%s must be in [%d, %d], not %r" % (name, lo, hi, value))
    return v


def _choice(name, table, value):
    if isinstance(value, str):
        if value not in table:
            raise ValueError("%s must be one of %s, not %r" % (name, ", ".join(repr(k) for k in table), value))
        return table[value]
    if isinstance(value, int) and value in table.values():
        return int(value)
    raise ValueError("%s must be one of %s, not %r" % (name, ", ".join(repr(k) for k in table), value))


def registration_image(a: Any, what: str = "image") -> Any:
    """An image as the registration takes it: uint8, uint16 or float32 (H, W)
    as it is (no copy; gray and alpha: the gray); RGB or RGBA (H, W, 3|4) as
    float32 gray (2125 R + 7154 G + 721 B) / 10000, the gray elastix (ITK)
    reads from an RGB file (alpha ignored); other real dtypes as float32."""
    import numpy as np
    a = host_only(a, what)
    if a.dtype.kind not in "biuf":
        raise TypeError("%s must be real numbers, not %s" % (what, a.dtype))
    if a.ndim == 3 and a.shape[2] in (1, 2):
        a = a[:, :, 0]
    if a.ndim == 3 and a.shape[2] in (3, 4):
        c = a[..., :3].astype(np.float64)
        return ((2125.0 * c[..., 0] + 7154.0 * c[..., 1] + 721.0 * c[..., 2]) / 10000.0).astype(np.float32)
    if a.ndim != 2:
        raise ValueError("%s must be (H, W), gray and alpha (H, W, 1|2) or RGB(A) (H, W, 3|4), not shape %s"
                         % (what, a.shape))
    if a.dtype.name in ("uint8", "uint16", "float32") and a.dtype.isnative:
        return a
    return a.astype(np.float32)


_REG_DTYPES = ("uint8", "uint16", "float32")


def _mask(m, shape):
    import numpy as np
    if m is None:
        return None
    m = host_only(m, "mask")
    if m.ndim == 3 and m.shape[2] == 1:
        m = m[:, :, 0]
    if m.shape != shape:
        raise ValueError("mask must have the fixed image's shape %s, not %s" % (shape, m.shape))
    return m if m.dtype == np.uint8 else (m != 0).astype(np.uint8)


def _report(r):
    levels = []
    for i in range(r.levels):
        v = r.level[i]
        levels.append({"iterations": v.iterations, "stop": STOPS.get(v.stop, str(v.stop)), "samples": v.samples,
                       "shape": (v.height, v.width), "grid_spacing": v.grid_spacing,
                       "metric_first": v.metric_first, "metric_last": v.metric_last, "seconds": v.seconds})
    return {"levels": levels, "seconds": r.seconds,
            "metric": levels[-1]["metric_last"] if levels else float("nan")}


def _default_context(ctx):
    if ctx is not None:
        return ctx
    from .context import Context
    return Context()


class Transform(Handle):
    """An accel_reg_transform: an optional linear initial part (elastix's
    translation, Euler or affine transform) followed by a cubic B-spline
    displacement over a control grid laid out as elastix lays it out over the
    fixed image, T(p) = B(L(p)).

    Transform(shape, grid_spacing=64.0, parameters=None, initial=None, ctx=None):
    shape is the fixed image's (rows, cols); parameters (default 0, the
    identity) are all x displacements node by node (x fastest), then all y;
    initial is (kind, params[, centre]) with kind "translation" (tx, ty),
    "rigid" (angle in radians, tx, ty) or "affine" (a11, a12, a21, a22, tx,
    ty), centre (x, y) of rotation. ctx: the Context its calls use (default:
    a new one).

    Examples
    --------
    >>> import accel
    >>> t = accel.Transform((100, 80), grid_spacing=16.0)
    >>> t.shape, t.grid["size"]
    ((100, 80), (8, 10))
    """

    _what = "transform"

    def __init__(self, shape: Sequence[int], grid_spacing: float = 64.0, parameters: Any = None,
                 initial: Optional[Sequence[Any]] = None, ctx: Any = None) -> None:
        self._ctx = _default_context(ctx)
        self.report = None
        g = RegGrid()
        shape = tuple(shape)
        if len(shape) != 2:
            raise ValueError("shape must be the fixed image's (rows, cols), not %s" % (shape,))
        rows, cols = (operator.index(v) for v in shape)
        if lib.accel_reg_grid_for(cols, rows, float(grid_spacing), ctypes.byref(g)) != 0:
            raise ValueError("shape %s and grid_spacing %r do not make a grid" % (tuple(shape), grid_spacing))
        h = ctypes.c_void_p()
        self._check(lib.accel_reg_transform_create(self._ctx.handle, ctypes.byref(g), ctypes.byref(h)))
        self._h = h
        if parameters is not None:
            self.parameters = parameters
        if initial is not None:
            self.set_initial(*initial)

    @classmethod
    def _wrap(cls, handle, ctx):
        t = cls.__new__(cls)
        t._ctx, t._h, t.report = ctx, handle, None
        return t

    def _destroy(self, h):
        lib.accel_reg_transform_destroy(h)

    def _check(self, status):
        check(status, self._ctx.handle)

    @classmethod
    def load(cls, path: Union[str, "os.PathLike[str]"], ctx: Any = None) -> "Transform":
        """Read an elastix TransformParameters file.

        accel's or elastix's own: a BSplineTransform whose initial transforms
        are translation, Euler or affine files, folded into one affine part;
        or one of those alone.

        Parameters
        ----------
        path : str or os.PathLike
        ctx : Context, optional

        Returns
        -------
        Transform

        Examples
        --------
        >>> import accel
        >>> t = accel.Transform.load("TransformParameters.0.txt")  # doctest: +SKIP
        """
        ctx = _default_context(ctx)
        h = ctypes.c_void_p()
        check(lib.accel_reg_transform_load(ctx.handle, os.fsencode(path), ctypes.byref(h)), ctx.handle)
        return cls._wrap(h, ctx)

    def save(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Write an elastix TransformParameters file that transformix reads.

        An initial part goes to "<path without .txt>.initial.txt" beside it.

        Examples
        --------
        >>> import accel
        >>> accel.Transform((64, 64)).save("TransformParameters.txt")  # doctest: +SKIP
        """
        self._check(lib.accel_reg_transform_save(self._ctx.handle, self.handle, os.fsencode(path)))

    def copy(self) -> "Transform":
        """An independent copy (same context).

        Examples
        --------
        >>> import accel
        >>> t = accel.Transform((16, 16), grid_spacing=8)
        >>> t.copy().shape
        (16, 16)
        """
        h = ctypes.c_void_p()
        self._check(lib.accel_reg_transform_clone(self._ctx.handle, self.handle, ctypes.byref(h)))
        t = self._wrap(h, self._ctx)
        t.report = self.report
        return t

    @property
    def grid(self) -> Dict[str, Any]:
        """The control grid in elastix's terms.

        Returns
        -------
        dict
            image_size (w, h) of the fixed image, size (nodes in x, in y),
            spacing and origin (x, y), pixels.

        Examples
        --------
        >>> import accel
        >>> accel.Transform((16, 32), grid_spacing=8).grid["image_size"]
        (32, 16)
        """
        g = RegGrid()
        self._check(lib.accel_reg_transform_grid(self.handle, ctypes.byref(g)))
        return {"image_size": tuple(g.image_size), "size": tuple(g.size), "spacing": tuple(g.spacing),
                "origin": tuple(g.origin)}

    @property
    def shape(self) -> Tuple[int, int]:
        """The fixed image's (rows, cols).

        Examples
        --------
        >>> import accel
        >>> accel.Transform((16, 32)).shape
        (16, 32)
        """
        w, h = self.grid["image_size"]
        return (h, w)

    @property
    def parameters(self) -> Any:
        """The B-spline parameters: all x displacements (x fastest), then all y.

        float64 (2 * nx * ny,); assigning sets them.

        Examples
        --------
        >>> import accel
        >>> t = accel.Transform((16, 16), grid_spacing=8)
        >>> t.parameters = t.parameters + 1.0
        >>> float(t.parameters.min())
        1.0
        """
        import numpy as np
        n = lib.accel_reg_transform_count(self.handle)
        out = np.empty(n, np.float64)
        self._check(lib.accel_reg_transform_parameters(self.handle, out.ctypes.data_as(P(ctypes.c_double)), n))
        return out

    @parameters.setter
    def parameters(self, values: Any) -> None:
        import numpy as np
        given = np.asarray(values)
        if given.dtype.kind not in "biuf":  # strings and complex values were converted (the imaginary part dropped)
            raise TypeError("parameters must be real numbers, not %s" % given.dtype)
        v = np.ascontiguousarray(given, dtype=np.float64).ravel()
        n = lib.accel_reg_transform_count(self.handle)
        if v.size != n:
            raise ValueError("a transform of this grid has %d parameters, not %d" % (n, v.size))
        if not np.all(np.isfinite(v)):
            raise ValueError("parameters must be finite")
        self._check(lib.accel_reg_transform_set_parameters(self.handle, v.ctypes.data_as(P(ctypes.c_double)), n))

    @property
    def initial(self) -> Optional[Tuple[str, Any, Tuple[float, float]]]:
        """The linear initial part: (kind, params, centre) or None.

        Examples
        --------
        >>> import accel
        >>> t = accel.Transform((16, 16), initial=("translation", (2.0, 1.0)))
        >>> t.initial[0], t.initial[1].tolist()
        ('translation', [2.0, 1.0])
        """
        import numpy as np
        kind = ctypes.c_int()
        params, centre = (ctypes.c_double * 6)(), (ctypes.c_double * 2)()
        self._check(lib.accel_reg_transform_initial(self.handle, ctypes.byref(kind), params, centre))
        name = LINEAR_NAMES.get(kind.value, str(kind.value))
        if name == "none":
            return None
        return name, np.array(params[:LINEAR_COUNTS[name]]), (centre[0], centre[1])

    def set_initial(self, kind: str, params: Sequence[float] = (), centre: Sequence[float] = (0.0, 0.0)) -> None:
        """Set the linear initial part.

        Parameters
        ----------
        kind : {"none", "translation", "rigid", "affine"}
        params : sequence of float
            (tx, ty); (angle in radians, tx, ty); (a11, a12, a21, a22, tx, ty).
        centre : (x, y)
            Of rotation.

        Examples
        --------
        >>> import accel
        >>> t = accel.Transform((16, 16))
        >>> t.set_initial("translation", (3.0, 0.0))
        >>> t.points([[0.0, 0.0]]).tolist()
        [[3.0, 0.0]]
        """
        import numpy as np
        if kind not in LINEAR_KINDS:
            raise ValueError("kind must be one of %s, not %r" % (", ".join(LINEAR_KINDS), kind))
        p = np.zeros(6, np.float64)
        given = np.asarray(params, dtype=np.float64).ravel()
        if given.size != LINEAR_COUNTS[kind]:
            raise ValueError("a %s initial part has %d parameters, not %d" % (kind, LINEAR_COUNTS[kind], given.size))
        p[:given.size] = given
        centre = tuple(float(v) for v in centre)
        if len(centre) != 2:
            raise ValueError("centre must be (x, y), not %s" % (centre,))
        c = (ctypes.c_double * 2)(*centre)
        self._check(lib.accel_reg_transform_set_initial(self._ctx.handle, self.handle, LINEAR_KINDS[kind],
                                                        p.ctypes.data_as(P(ctypes.c_double)), c))

    def points(self, xy: Any) -> Any:
        """T at points of the fixed image.

        Parameters
        ----------
        xy : array (..., 2)
            (x, y) = (column, row).

        Returns
        -------
        numpy.ndarray
            float64 of the same shape: the points in the moving image.

        Examples
        --------
        >>> import accel
        >>> accel.Transform((16, 16)).points([[1.5, 2.0]]).tolist()
        [[1.5, 2.0]]
        """
        import numpy as np
        pts = np.array(xy, dtype=np.float64, order="C", copy=True)
        if pts.shape[-1:] != (2,):
            raise ValueError("xy must have shape (..., 2), not %s" % (pts.shape,))
        self._check(lib.accel_reg_transform_points(self._ctx.handle, self.handle,
                                                   pts.ctypes.data_as(P(ctypes.c_double)), pts.size // 2))
        return pts

    def _region(self, region):
        if region is None:
            h, w = self.shape
            return 0, 0, w, h
        region = tuple(region)
        if len(region) != 4:
            raise ValueError("region must be (x0, y0, w, h), not %r" % (region,))
        try:  # a fractional value was truncated (1.7 became 1)
            x0, y0, w, h = (operator.index(v) for v in region)
        except TypeError:
            raise TypeError("region must be 4 integers (x0, y0, w, h), not %r" % (region,)) from None
        if w < 0 or h < 0:
            raise ValueError("region's width and height must be >= 0")
        return x0, y0, w, h

    def field(self, region: Optional[Sequence[int]] = None) -> Any:
        """The displacement u(p) = T(p) - p at the pixels of a region of the fixed grid.

        Parameters
        ----------
        region : (x0, y0, w, h), optional
            Default: the whole fixed image.

        Returns
        -------
        numpy.ndarray
            float32 (2, h, w): [0] u_x (columns), [1] u_y (rows), as
            ``accel register --out-field``.

        Examples
        --------
        >>> import accel
        >>> accel.Transform((4, 6), initial=("translation", (1.0, 0.0))).field()[0].max().item()
        1.0
        """
        import numpy as np
        x0, y0, w, h = self._region(region)
        out = np.empty((2, h, w), np.float32)
        self._check(lib.accel_reg_transform_field(self._ctx.handle, self.handle, x0, y0, ref(out, True)))
        return out

    def warp(self, images: Any, interp: str = "cubic", fill: float = 0.0,
             region: Optional[Sequence[int]] = None, tile: int = 0, progress: ProgressArg = None) -> Any:
        """Resample images of the moving image's frame onto the fixed grid.

        ``out(r, c) = image(T(x0 + c, y0 + r))``, `fill` outside (more than
        half a pixel beyond the edge pixels, as elastix).

        Parameters
        ----------
        images : array or sequence of arrays
            Each (H, W) or (H, W, C), C = 1, 3 or 4, uint8, uint16 or
            float32, any size; one array alone is one image. Other
            floating-point arrays (float16, float64) are warped as float32
            and returned in their own dtype.
        interp : {"cubic", "linear"}
            B-spline of order 3 (transformix's final resampler) or linear.
        fill : float
        region : (x0, y0, w, h), optional
            Default: the whole fixed image.
        tile : int
            Rows per tile (0: chosen; never changes results).
        progress : None, True or callable(stage, fraction)

        Returns
        -------
        array or list of arrays
            Each of its input's dtype and channels (integers rounded to
            nearest and clamped) and kind; a list for a list.

        Examples
        --------
        >>> import accel, numpy as np
        >>> img = np.arange(64, dtype=np.float32).reshape(8, 8)
        >>> with accel.Context() as ctx:
        ...     t = accel.Transform(img.shape, grid_spacing=4, ctx=ctx)
        ...     bool(np.allclose(t.warp(img), img, atol=1e-3))
        True
        """
        import numpy as np
        single = isinstance(images, np.ndarray) or hasattr(images, "__dlpack__") \
            or hasattr(images, "__cuda_array_interface__")
        given = [images] if single else list(images)
        o = RegWarpOptions.defaults()
        o.interp = _choice("interp", INTERPS, interp)
        # GPU arrays on this context's device are read and written in place (cubic: the
        # coefficients made on the device)
        views = [device_in(self._ctx, a, ("uint8", "uint16", "float32"), (2, 3), as3d=False, bool_as_uint8=False)
                 for a in given]
        pairs = [(v, None) if v is not None else _warp_host(a) for v, a in zip(views, given)]
        ins = [a for a, _ in pairs]
        if not ins:
            return []
        x0, y0, w, h = self._region(region)
        outs = [device_empty(a.obj, (h, w) + tuple(a.shape[2:]), a.dtype, as3d=False) if isinstance(a, DeviceView)
                else np.empty((h, w) + tuple(a.shape[2:]), a.dtype) for a in ins]
        o.fill, o.x0, o.y0, o.tile = float(fill), x0, y0, int(tile)
        din = [a.array if isinstance(a, DeviceView) else as_array(a) for a in ins]
        dout = [a.array if isinstance(a, DeviceView) else as_array(a, True) for a in outs]
        pin = (P(Array) * len(ins))(*(ctypes.pointer(d) for d in din))
        pout = (P(Array) * len(ins))(*(ctypes.pointer(d) for d in dout))
        with Call(progress) as c:
            o.progress = c.fn
            self._check(lib.accel_reg_warp(self._ctx.handle, self.handle, pin, pout, len(ins), ctypes.byref(o)))
        outs = [a.obj if back is None else back(a) for a, (_, back) in zip(outs, pairs)]
        return outs[0] if single else outs


def _warp_host(a):
    """(array, back) for a host layer of the warp: floating-point arrays
    other than native float32 warped as float32 and given back in their
    own dtype (the library's warp computes in float32 either way)."""
    import numpy as np
    arr, back = host(a, "image")
    if arr.dtype.kind != "f" or (arr.dtype == np.float32 and arr.dtype.isnative):
        return arr, back
    dtype = arr.dtype
    return arr.astype(np.float32), lambda r: back(r.astype(dtype))


# The Transform class under a name that Reg's annotations can use (Reg.Transform shadows it there).
TransformT = Transform


class Reg(ContextCalls):
    """B-spline registration and warping (include/accel/reg.h, docs/reg.md):
    ``ctx.reg.register(fixed, moving, ...)`` returns a Transform.

    Examples
    --------
    >>> import accel, numpy as np
    >>> img = np.random.default_rng(0).random((64, 64)).astype(np.float32)
    >>> with accel.Context() as ctx:
    ...     t = ctx.reg.register(img, img, grid_spacing=32, levels=1, iterations=5)
    ...     t.shape
    (64, 64)
    """

    Transform = Transform

    @staticmethod
    def options(preset: str = "default", **options: Any) -> Any:
        """The accel_reg_options of a preset with the named options set over it.

        Parameters
        ----------
        preset : {"default", "elastix"}
        **options
            Fields of accel_reg_options by name (see :meth:`register`).

        Returns
        -------
        RegOptions
            The ctypes struct.

        Examples
        --------
        >>> import accel
        >>> accel.Reg.options("elastix", levels=2).levels
        2
        """
        o = RegOptions.defaults()
        if lib.accel_reg_options_preset(ctypes.byref(o), str(preset).encode()) != 0:
            raise ValueError("preset must be 'default' or 'elastix', not %r" % (preset,))
        for name, value in options.items():
            kind = _OPTIONS.get(name)
            if kind is None:
                raise TypeError("unknown option %r (options: %s)" % (name, ", ".join(sorted(_OPTIONS))))
            setattr(o, name, _choice(name, kind, value) if isinstance(kind, dict) else
                    _integer(name, value) if kind is int else kind(value))
        return o

    def register(self, fixed: Any, moving: Any, mask: Any = None,
                 initial: Union[TransformT, str, "os.PathLike[str]", None] = None,
                 progress: ProgressArg = None, preset: str = "default", **options: Any) -> TransformT:
        """Register moving to fixed: the Transform T with moving(T(p)) ~ fixed(p).

        Parameters
        ----------
        fixed, moving : array
            2-D uint8, uint16 or float32 (any sizes and strides; RGB(A) and
            other dtypes are converted as ``registration_image`` says).
        mask : array, optional
            The fixed image's shape, nonzero = inside: limits the samples.
        initial : Transform or path, optional
            Where to start from: a Transform, or a TransformParameters file
            (``Transform.load``). Its linear part is kept; a B-spline part
            must be on the final grid (ValueError otherwise).
        progress : None, True or callable(level, iteration, metric)
            Called after every iteration; a true result cancels
            (CancelledError), an exception it raises cancels and is re-raised;
            True shows a progress bar over the whole registration, as the
            CLI's: "reg level L/N", each level's share filled as its
            iterations approach the limit (a level that stops early
            leaves the rest of its share unfilled).
        preset : {"default", "elastix"}
        **options
            levels (0, the default: 4, or 5 when the fixed image's shorter
            side is at least 2048 px), grid_spacing, downsample, iterations, samples,
            renew_samples, seed, metric ("mse" | "ncc"), optimizer
            ("gauss-newton" | "asgd"), bending_weight, tolerance, window,
            validation_samples, prealign ("none" | "translation" | "rigid").

        Returns
        -------
        Transform
            Over the fixed image's grid; its ``report`` says what each level did.

        Examples
        --------
        >>> import accel, numpy as np
        >>> img = np.random.default_rng(0).random((64, 64)).astype(np.float32)
        >>> with accel.Context() as ctx:
        ...     t = ctx.reg.register(img, img, grid_spacing=32, levels=1, iterations=5)
        >>> len(t.report["levels"])
        1
        """
        # 2-D uint8, uint16 or float32 GPU arrays on this context's device are read in place
        f = device_in(self._ctx, fixed, _REG_DTYPES, (2,), as3d=False, bool_as_uint8=False) \
            or registration_image(fixed, "fixed")
        m = device_in(self._ctx, moving, _REG_DTYPES, (2,), as3d=False, bool_as_uint8=False) \
            or registration_image(moving, "moving")
        k = _mask(mask, tuple(f.shape))
        o = self.options(preset, **options)
        if isinstance(initial, (str, bytes, os.PathLike)):
            initial = Transform.load(initial, self._ctx)
        elif initial is not None and not isinstance(initial, Transform):
            raise TypeError("initial must be a Transform or a TransformParameters file's path, not %s"
                            % type(initial).__name__)
        if progress is True:
            # as the CLI's bar: the whole registration, a level's share
            # filled as its iterations reach the limit (early stopping ends
            # a level sooner, and the bar then jumps to the next one)
            iterations = max(int(o.iterations), 1)
            levels = max(int(lib.accel_reg_levels_for(ctypes.byref(o), f.shape[1], f.shape[0])), 1)

            def adapt(level, iteration, metric):
                within = min(iteration / iterations, 1.0)
                return ("reg level %d/%d" % (level + 1, levels), (level + within) / levels)
        else:
            def adapt(level, iteration, metric):
                return level, iteration, metric
        report = RegReport.defaults()
        h = ctypes.c_void_p()
        with Call(progress, REG_PROGRESS_FN, adapt, "level, iteration, metric") as c:
            o.progress = c.fn
            self._call(lib.accel_reg_register, f.ref() if isinstance(f, DeviceView) else ref(f),
                       m.ref() if isinstance(m, DeviceView) else ref(m), ref(k),
                       initial.handle if initial is not None else None, ctypes.byref(o), ctypes.byref(h),
                       ctypes.byref(report))
        t = Transform._wrap(h, self._ctx)
        t.report = _report(report)
        return t

    def load(self, path: Union[str, "os.PathLike[str]"]) -> TransformT:
        """``Transform.load(path)`` with this context.

        Examples
        --------
        >>> import accel
        >>> with accel.Context() as ctx:
        ...     t = ctx.reg.load("TransformParameters.txt")  # doctest: +SKIP
        """
        return Transform.load(path, self._ctx)

    def warp(self, transform: TransformT, images: Any, **kwargs: Any) -> Any:
        """``transform.warp(images, ...)``.

        Examples
        --------
        >>> import accel, numpy as np
        >>> with accel.Context() as ctx:
        ...     t = accel.Transform((8, 8), grid_spacing=4, ctx=ctx)
        ...     ctx.reg.warp(t, np.ones((8, 8), np.uint8)).dtype.name
        'uint8'
        """
        return transform.warp(images, **kwargs)

