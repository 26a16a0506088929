"""Shadows and sky view factors of surface models, as UMEP's SOLWEIG computes
them (include/accel/svf.h, docs/svf.md): ctx.svf."""
import ctypes
from typing import Any, Callable, Dict, Optional, Tuple

from ._arrays import Array, DeviceView, as_array, device_empty, device_in, host, real_as_f32, ref
from ._errors import ContextCalls, check
from ._native import P, c_status, c_struct, declare, lib
from ._progress import Call, ProgressArg

SVF_GRIDS = ("svf", "svfE", "svfS", "svfW", "svfN",
             "svfveg", "svfEveg", "svfSveg", "svfWveg", "svfNveg",
             "svfaveg", "svfEaveg", "svfSaveg", "svfWaveg", "svfNaveg")
SVF_MATRICES = ("shmat", "vegshmat", "vbshvegshmat")

SvfOptions = c_struct("accel_svf_options", """
    uint32_t struct_size; double pixel_size; int32_t patches; double trunk_ratio; double max_height; int64_t tile;
    accel_progress_fn progress; void *progress_user;""")

declare({
    "accel_svf_options_init": (c_status, [P(SvfOptions), ctypes.c_size_t]),
    "accel_svf_patches": (ctypes.c_int, [ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]),
    "accel_svf_grid_name": (ctypes.c_char_p, [ctypes.c_int32]),
    "accel_svf_shadows": (c_status, [ctypes.c_void_p, P(Array), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_double,
                                     ctypes.c_double, P(SvfOptions), P(Array), ctypes.c_void_p, ctypes.c_void_p]),
    "accel_svf_sky": (c_status, [ctypes.c_void_p, P(Array), ctypes.c_void_p, ctypes.c_void_p, P(SvfOptions),
                                 ctypes.c_void_p, ctypes.c_void_p]),
})


def _patch_count(option):
    n = ctypes.c_int32()
    if lib.accel_svf_patches(int(option), ctypes.byref(n), None, None) != 0:
        raise ValueError("patches: UMEP's options are 145, 153, 306 and 612, not %r" % (option,))
    return n.value


def _addresses(descs):
    """A C array of the addresses of accel_array descriptions (None: NULL)."""
    out = (ctypes.c_void_p * len(descs))()
    for i, d in enumerate(descs):
        if d is not None:
            out[i] = ctypes.addressof(d)
    return out


class SVF(ContextCalls):
    """Shadows and sky view factors as UMEP's SOLWEIG computes them
    (include/accel/svf.h, docs/svf.md), on 2-D grids (rows, cols).

    Grids are numpy arrays (any strides) or host DLPack arrays of any real
    dtype, converted to float32 (UMEP computes in float32); results come
    back as the dsm's kind of array. dsm: ground and buildings (m); cdsm:
    vegetation height above ground (None: none); tdsm: trunk-zone height
    (None: trunk_ratio * cdsm). pixel_size in metres is required.

    Examples
    --------
    >>> import accel, numpy as np
    >>> with accel.Context() as ctx:
    ...     sorted(ctx.svf.sky(np.zeros((8, 8)), pixel_size=1.0))
    ['svf', 'svfE', 'svfN', 'svfS', 'svfW']
    """

    @staticmethod
    def _grid(a: Any, what: str) -> Tuple[Any, Optional[Callable[[Any], Any]]]:
        if a is None:
            return None, None
        g, back = host(a, what)
        g = real_as_f32(g, what)
        if g.ndim != 2:
            raise ValueError("%s must be a 2-D grid (rows, cols), not %d-D" % (what, g.ndim))
        return g, back

    @classmethod
    def _grids(cls, dsm, cdsm, tdsm):
        (d, back), (c, _), (t, _) = cls._grid(dsm, "dsm"), cls._grid(cdsm, "cdsm"), cls._grid(tdsm, "tdsm")
        return d, c, t, back

    def _device_grids(self, dsm, cdsm, tdsm):
        """DeviceViews of the inputs when every one given is a float32 2-D GPU
        array this context reads in place (their results are made on the
        device too), else None."""
        views = [device_in(self._ctx, a, ("float32",), (2,), as3d=False) if a is not None else False
                 for a in (dsm, cdsm, tdsm)]
        if any(v is None for v in views):
            return None
        return [v if v is not False else None for v in views]

    @staticmethod
    def _out(dv, shape, dtype):
        """An output: a GPU array like the DSM's when dv (its view), else numpy."""
        import numpy as np
        if dv is None:
            return np.empty(shape, dtype)
        return device_empty(dv.obj, shape, dtype, as3d=False)

    @staticmethod
    def _desc(a):
        return a.array if isinstance(a, DeviceView) else as_array(a, True)

    @staticmethod
    def _ref(a):
        return a.ref() if isinstance(a, DeviceView) else ref(a)

    @staticmethod
    def _options(pixel_size, patches=153, trunk_ratio=0.25, max_height=0.0, tile=0):
        o = SvfOptions.defaults()
        o.pixel_size = float(pixel_size)
        o.patches = int(patches)
        o.trunk_ratio = float(trunk_ratio)
        o.max_height = float(max_height)
        o.tile = int(tile)
        return o

    @staticmethod
    def patches(option: int = 153) -> Tuple[Any, Any]:
        """The sky patches of a patch option, in UMEP's order (the matrices' bit order).

        Parameters
        ----------
        option : {145, 153, 306, 612}

        Returns
        -------
        (numpy.ndarray, numpy.ndarray)
            Azimuth and altitude of every patch, degrees.

        Examples
        --------
        >>> import accel
        >>> az, alt = accel.SVF.patches(153)
        >>> len(az)
        153
        """
        import numpy as np
        n = _patch_count(option)
        az, alt = np.empty(n), np.empty(n)
        check(lib.accel_svf_patches(int(option), ctypes.byref(ctypes.c_int32()), az.ctypes.data, alt.ctypes.data),
              None)
        return az, alt

    def shadows(self, dsm: Any, azimuth: float, altitude: float, pixel_size: float, cdsm: Any = None,
                tdsm: Any = None, trunk_ratio: float = 0.25, max_height: float = 0.0, tile: int = 0,
                progress: ProgressArg = None) -> Dict[str, Any]:
        """UMEP's shadowingfunction_20 for one sun position.

        Parameters
        ----------
        dsm : array
            2-D surface model (m).
        azimuth, altitude : float
            The sun's position, degrees.
        pixel_size : float
            Metres.
        cdsm, tdsm : array, optional
            Vegetation and trunk zone heights above ground.
        trunk_ratio, max_height, tile
            As the class says; tile never changes results.
        progress : None, True or callable(stage, fraction)

        Returns
        -------
        dict
            float32 grids "sh", "vegsh", "vbshvegsh" (1 = sunlit).

        Examples
        --------
        >>> import accel, numpy as np
        >>> dsm = np.zeros((5, 5)); dsm[2, 2] = 10
        >>> with accel.Context() as ctx:
        ...     sh = ctx.svf.shadows(dsm, azimuth=180, altitude=45, pixel_size=1.0)["sh"]
        >>> int(sh[1, 2]), int(sh[2, 0])
        (0, 1)
        """
        dev = self._device_grids(dsm, cdsm, tdsm)  # float32 GPU grids: read and written in place
        d, c, t, back = dev + [None] if dev else self._grids(dsm, cdsm, tdsm)
        o = self._options(pixel_size, 153, trunk_ratio, max_height, tile)
        out = {k: self._out(d if dev else None, tuple(d.shape), "float32") for k in ("sh", "vegsh", "vbshvegsh")}
        arr = {k: self._desc(v) for k, v in out.items()}
        with Call(progress) as cb:
            o.progress = cb.fn
            self._call(lib.accel_svf_shadows, self._ref(d), self._ref(c), self._ref(t), float(azimuth),
                       float(altitude), ctypes.byref(o), ctypes.byref(arr["sh"]), ctypes.byref(arr["vegsh"]),
                       ctypes.byref(arr["vbshvegsh"]))
        return {k: v.obj if dev else back(v) for k, v in out.items()}

    def sky(self, dsm: Any, pixel_size: float, cdsm: Any = None, tdsm: Any = None, patches: int = 153,
            trunk_ratio: float = 0.25, max_height: float = 0.0, tile: int = 0, matrices: bool = False,
            unpack: bool = False, progress: ProgressArg = None) -> Dict[str, Any]:
        """UMEP's svfForProcessing153: sky view factors.

        Parameters
        ----------
        dsm : array
            2-D surface model (m).
        pixel_size : float
            Metres.
        cdsm, tdsm : array, optional
            Vegetation and trunk zone heights above ground.
        patches : {145, 153, 306, 612}
            UMEP's patch option.
        trunk_ratio, max_height, tile
            As the class says; tile never changes results.
        matrices : bool
            Also "shmat" (and "vegshmat", "vbshvegshmat" with a cdsm): uint8
            (rows, cols, ceil(P/8)), patch p in bit p % 8 of byte p // 8.
        unpack : bool
            Matrices as uint8 0/1 (rows, cols, P) instead.
        progress : None, True or callable(stage, fraction)

        Returns
        -------
        dict
            float32 grids: the 5 building grids, and the 10 vegetation ones
            with a cdsm; the matrices when asked for.

        Examples
        --------
        >>> import accel, numpy as np
        >>> with accel.Context() as ctx:
        ...     float(ctx.svf.sky(np.zeros((4, 4)), pixel_size=2.0)["svf"][0, 0])
        1.0
        """
        # float32 GPU grids: read and written in place, the matrices too (unpacked by the library)
        dev = self._device_grids(dsm, cdsm, tdsm)
        d, c, t, back = dev + [None] if dev else self._grids(dsm, cdsm, tdsm)
        o = self._options(pixel_size, patches, trunk_ratio, max_height, tile)
        n = _patch_count(patches)
        names = SVF_GRIDS if c is not None else SVF_GRIDS[:5]
        like = d if dev else None
        out = {k: self._out(like, tuple(d.shape), "float32") for k in names}
        grid_descs = [self._desc(out[k]) if k in out else None for k in SVF_GRIDS]
        mat_descs = []
        if matrices:
            for k in SVF_MATRICES[:3 if c is not None else 1]:
                depth = n if unpack else (n + 7) // 8
                out[k] = self._out(like, tuple(d.shape) + (depth,), "uint8")  # every byte is written
                mat_descs.append(self._desc(out[k]))
            mat_descs += [None] * (3 - len(mat_descs))
        with Call(progress) as cb:
            o.progress = cb.fn
            self._call(lib.accel_svf_sky, self._ref(d), self._ref(c), self._ref(t), ctypes.byref(o),
                       _addresses(grid_descs), _addresses(mat_descs) if matrices else None)
        if dev:
            return {k: v.obj for k, v in out.items()}
        return {k: back(v) for k, v in out.items()}
