"""Shadows and sky view factors of surface models, as UMEP's SOLWEIG computes
them (include/accel/svf.h, docs/svf.md): ctx.svf."""
import ctypes

from ._arrays import Array, as_array, ref
from ._errors import ContextCalls, check
from ._native import P, c_status, c_struct, declare, lib, progress_fn

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
    (include/accel/svf.h, docs/svf.md), on 2-D numpy grids (rows, cols),
    converted to float32. dsm: ground and buildings (m); cdsm: vegetation
    height above ground (None: none); tdsm: trunk-zone height (None:
    trunk_ratio * cdsm). pixel_size in metres is required."""

    @staticmethod
    def _grid(a, what):
        import numpy as np
        if a is None:
            return None
        a = np.asarray(a, dtype=np.float32)
        if a.ndim != 2:
            raise ValueError("%s must be a 2-D grid (rows, cols), not %d-D" % (what, a.ndim))
        return a

    @classmethod
    def _grids(cls, dsm, cdsm, tdsm):
        return cls._grid(dsm, "dsm"), cls._grid(cdsm, "cdsm"), cls._grid(tdsm, "tdsm")

    @staticmethod
    def _options(pixel_size, patches=153, trunk_ratio=0.25, max_height=0.0, tile=0, progress=None):
        o = SvfOptions.defaults()
        o.pixel_size = float(pixel_size)
        o.patches = int(patches)
        o.trunk_ratio = float(trunk_ratio)
        o.max_height = float(max_height)
        o.tile = int(tile)
        cb = progress_fn(progress)
        if cb is not None:
            o.progress = cb
        return o, cb

    @staticmethod
    def patches(option=153):
        """(azimuth, altitude) in degrees of every patch of a patch option, in
        UMEP's order (the matrices' bit order)."""
        import numpy as np
        n = _patch_count(option)
        az, alt = np.empty(n), np.empty(n)
        check(lib.accel_svf_patches(int(option), ctypes.byref(ctypes.c_int32()), az.ctypes.data, alt.ctypes.data),
              "accel_svf_patches")
        return az, alt

    def shadows(self, dsm, azimuth, altitude, pixel_size, cdsm=None, tdsm=None, trunk_ratio=0.25, max_height=0.0,
                tile=0, progress=None):
        """UMEP's shadowingfunction_20 for one sun position: a dict of float32
        grids "sh", "vegsh", "vbshvegsh" (1 = sunlit)."""
        import numpy as np
        d, c, t = self._grids(dsm, cdsm, tdsm)
        o, keep = self._options(pixel_size, 153, trunk_ratio, max_height, tile, progress)
        out = {k: np.empty(d.shape, np.float32) for k in ("sh", "vegsh", "vbshvegsh")}
        arr = {k: as_array(v, True) for k, v in out.items()}
        self._call(lib.accel_svf_shadows, ref(d), ref(c), ref(t), float(azimuth), float(altitude), ctypes.byref(o),
                   ctypes.byref(arr["sh"]), ctypes.byref(arr["vegsh"]), ctypes.byref(arr["vbshvegsh"]))
        del keep
        return out

    def sky(self, dsm, pixel_size, cdsm=None, tdsm=None, patches=153, trunk_ratio=0.25, max_height=0.0, tile=0,
            matrices=False, unpack=False, progress=None):
        """UMEP's svfForProcessing153: a dict of the float32 grids (the 5
        building grids, and the 10 vegetation ones with a cdsm). With
        matrices=True also "shmat" (and "vegshmat", "vbshvegshmat" with a
        cdsm): uint8 (rows, cols, ceil(P/8)) with patch p in bit p % 8 of
        byte p // 8, or with unpack=True uint8 0/1 (rows, cols, P) as
        np.unpackbits(m, axis=2, bitorder="little")[..., :P]."""
        import numpy as np
        d, c, t = self._grids(dsm, cdsm, tdsm)
        o, keep = self._options(pixel_size, patches, trunk_ratio, max_height, tile, progress)
        n = _patch_count(patches)
        names = SVF_GRIDS if c is not None else SVF_GRIDS[:5]
        out = {k: np.empty(d.shape, np.float32) for k in names}
        grid_descs = [as_array(out[k], True) if k in out else None for k in SVF_GRIDS]
        mat_descs = []
        if matrices:
            for k in SVF_MATRICES[:3 if c is not None else 1]:
                out[k] = np.zeros(d.shape + ((n + 7) // 8,), np.uint8)
                mat_descs.append(as_array(out[k], True))
            mat_descs += [None] * (3 - len(mat_descs))
        self._call(lib.accel_svf_sky, ref(d), ref(c), ref(t), ctypes.byref(o), _addresses(grid_descs),
                   _addresses(mat_descs) if matrices else None)
        del keep
        if matrices and unpack:
            for k in SVF_MATRICES:
                if k in out:
                    out[k] = np.unpackbits(out[k], axis=2, bitorder="little")[..., :n]
        return out
