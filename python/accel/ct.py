"""CT pore segmentation on numpy volumes (include/accel/ct.h, docs/ct.md): the
stages and the pipeline of ctx.ct, and the pore network as a dict."""
import ctypes

from ._arrays import Array, as_array, ref
from ._errors import ContextCalls, check
from ._native import P, c_status, c_struct, declare, lib, progress_fn

COMPARES = {">": 0, ">=": 1, "<": 2, "<=": 3}
PORES = {"closed": 0, "all": 1}
TIES = {"skimage": 0, "stable": 1}
TRIMS = {"saddles": 1, "nearby": 2}

CtMarkerOptions = c_struct("accel_ct_marker_options", """
    uint32_t struct_size; int32_t min_distance; double smooth_sigma; accel_progress_fn progress;
    void *progress_user; uint32_t trim; int32_t saddle_iterations; double nearby_factor; double spacing[3];""")
CtWatershedOptions = c_struct("accel_ct_watershed_options", """
    uint32_t struct_size; accel_ct_ties ties; accel_progress_fn progress; void *progress_user;""")
CtRegion = c_struct("accel_ct_region", """
    uint32_t struct_size; uint32_t label; uint64_t voxels; double volume; double equivalent_radius;
    double centroid[3]; double inscribed_radius;""")
CtThroat = c_struct("accel_ct_throat", """
    uint32_t struct_size; uint32_t a, b; uint64_t faces; double area; double inscribed_radius;""")
CtPipelineOptions = c_struct("accel_ct_pipeline_options", """
    uint32_t struct_size; const double *slope, *intercept; double threshold; accel_ct_compare compare;
    accel_ct_connectivity fill_connectivity; accel_ct_pores pores; double spacing[3]; int32_t min_distance;
    double smooth_sigma; accel_ct_ties ties; accel_progress_fn progress; void *progress_user; uint32_t trim;
    int32_t saddle_iterations; double nearby_factor;""")
CtOutputs = c_struct("accel_ct_outputs", """
    uint32_t struct_size; const accel_array *solid, *filled, *pores, *edt, *markers, *labels;
    accel_ct_network **network; uint32_t marker_count;""")

_CTX, _ADDR = ctypes.c_void_p, ctypes.c_void_p
declare({
    "accel_ct_rescale": (c_status, [_CTX, P(Array), _ADDR, _ADDR, P(Array)]),
    "accel_ct_threshold": (c_status, [_CTX, P(Array), ctypes.c_double, ctypes.c_int, P(Array)]),
    "accel_ct_fill_holes": (c_status, [_CTX, P(Array), ctypes.c_int, P(Array)]),
    "accel_ct_edt": (c_status, [_CTX, P(Array), _ADDR, P(Array)]),
    "accel_ct_marker_options_init": (c_status, [P(CtMarkerOptions), ctypes.c_size_t]),
    "accel_ct_trim_markers": (c_status, [_CTX, P(Array), P(Array), P(CtMarkerOptions), P(Array),
                                         P(ctypes.c_uint32)]),
    "accel_ct_markers": (c_status, [_CTX, P(Array), P(Array), P(CtMarkerOptions), P(Array), P(ctypes.c_uint32)]),
    "accel_ct_watershed_options_init": (c_status, [P(CtWatershedOptions), ctypes.c_size_t]),
    "accel_ct_watershed": (c_status, [_CTX, P(Array), P(Array), _ADDR, P(CtWatershedOptions), P(Array)]),
    "accel_ct_network_build": (c_status, [_CTX, P(Array), P(Array), _ADDR, P(ctypes.c_void_p)]),
    "accel_ct_network_info": (c_status, [ctypes.c_void_p, P(ctypes.c_size_t), P(ctypes.c_size_t),
                                         P(ctypes.c_double)]),
    "accel_ct_network_region": (c_status, [ctypes.c_void_p, ctypes.c_size_t, P(CtRegion)]),
    "accel_ct_network_throat": (c_status, [ctypes.c_void_p, ctypes.c_size_t, P(CtThroat)]),
    "accel_ct_network_destroy": (None, [ctypes.c_void_p]),
    "accel_ct_pipeline_options_init": (c_status, [P(CtPipelineOptions), ctypes.c_size_t]),
    "accel_ct_outputs_init": (c_status, [P(CtOutputs), ctypes.c_size_t]),
    "accel_ct_pipeline_create": (c_status, [_CTX, P(CtPipelineOptions), P(ctypes.c_void_p)]),
    "accel_ct_pipeline_destroy": (None, [ctypes.c_void_p]),
    "accel_ct_pipeline_run": (c_status, [ctypes.c_void_p, P(Array), _ADDR, P(CtOutputs)]),
})

_VOLUME_DTYPES = ("uint8", "int16", "uint16", "int32", "float32")
_OUTPUT_DTYPES = {"solid": "bool", "filled": "bool", "pores": "bool", "edt": "float32", "markers": "int32",
                  "labels": "int32"}


def _per_slice(value, nz):
    """A scalar, or one value per slice, as nz contiguous float64 values."""
    import numpy as np
    return np.ascontiguousarray(np.broadcast_to(np.asarray(value, float), (nz,)))


def _network_dict(h):
    try:
        nr, nt, por = ctypes.c_size_t(), ctypes.c_size_t(), ctypes.c_double()
        check(lib.accel_ct_network_info(h, ctypes.byref(nr), ctypes.byref(nt), ctypes.byref(por)))
        regions, throats = [], []
        for i in range(nr.value):
            r = CtRegion()
            r.struct_size = ctypes.sizeof(r)
            check(lib.accel_ct_network_region(h, i, ctypes.byref(r)))
            regions.append({"label": r.label, "voxels": r.voxels, "volume": r.volume,
                            "equivalent_radius": r.equivalent_radius, "centroid": tuple(r.centroid),
                            "inscribed_radius": r.inscribed_radius})
        for i in range(nt.value):
            t = CtThroat()
            t.struct_size = ctypes.sizeof(t)
            check(lib.accel_ct_network_throat(h, i, ctypes.byref(t)))
            throats.append({"a": t.a, "b": t.b, "faces": t.faces, "area": t.area,
                            "inscribed_radius": t.inscribed_radius})
        return {"porosity": por.value, "regions": regions, "throats": throats}
    finally:
        lib.accel_ct_network_destroy(h)


class CT(ContextCalls):
    """CT pore segmentation on numpy volumes indexed (z, y, x) (include/accel/ct.h).

    Masks come back as bool arrays; every stage accepts any strides. The
    semantics are SciPy's (fill_holes, edt) and scikit-image 0.19.3's
    (markers = peak_local_max, watershed), reproduced exactly."""

    @staticmethod
    def _vol(a, dtypes, what):
        import numpy as np
        a = np.asarray(a)
        if a.ndim != 3:
            raise ValueError("%s must be a 3-D volume (z, y, x), not %d-D" % (what, a.ndim))
        if a.dtype == bool:
            return a
        if a.dtype.name not in dtypes:
            raise TypeError("%s must be %s, not %s" % (what, " or ".join(dtypes), a.dtype))
        return a

    @classmethod
    def _volume(cls, volume):
        """An input volume of any supported dtype; a bool one as uint8."""
        import numpy as np
        v = cls._vol(volume, _VOLUME_DTYPES, "volume")
        return v.view(np.uint8) if v.dtype == bool else v

    @staticmethod
    def _spacing(spacing):
        if spacing is None:
            return None
        sp = (ctypes.c_double * 3)(*[float(x) for x in spacing])
        if len(spacing) != 3:
            raise ValueError("spacing has 3 values (z, y, x)")
        return sp

    def rescale(self, volume, slope=None, intercept=None):
        """int16/uint16 -> float32: volume * slope[z] + intercept[z] (DICOM's rescale);
        slope and intercept are per slice (or scalars)."""
        import numpy as np
        v = self._vol(volume, ("int16", "uint16"), "volume")
        nz = v.shape[0]
        sl = None if slope is None else _per_slice(slope, nz)
        ic = None if intercept is None else _per_slice(intercept, nz)
        out = np.empty(v.shape, np.float32)
        self._call(lib.accel_ct_rescale, ref(v), None if sl is None else sl.ctypes.data,
                   None if ic is None else ic.ctypes.data, ref(out, True))
        return out

    def threshold(self, volume, threshold, compare=">"):
        """volume <compare> threshold as a bool volume; compare one of > >= < <=."""
        import numpy as np
        v = self._volume(volume)
        out = np.empty(v.shape, bool)
        self._call(lib.accel_ct_threshold, ref(v), float(threshold), COMPARES[compare], ref(out, True))
        return out

    def fill_holes(self, mask, connectivity=6):
        """scipy.ndimage.binary_fill_holes (connectivity 6, SciPy's default, or 26)."""
        import numpy as np
        m = self._vol(mask, ("uint8",), "mask")
        out = np.empty(m.shape, bool)
        self._call(lib.accel_ct_fill_holes, ref(m), int(connectivity), ref(out, True))
        return out

    def edt(self, mask, spacing=None):
        """scipy.ndimage.distance_transform_edt(mask, sampling=spacing) as float32."""
        import numpy as np
        m = self._vol(mask, ("uint8",), "mask")
        out = np.empty(m.shape, np.float32)
        self._call(lib.accel_ct_edt, ref(m), self._spacing(spacing), ref(out, True))
        return out

    def _numbered(self, fn, edt, given, options):
        """fn(edt, given, options) writing an int32 volume and its count: (volume, n)."""
        import numpy as np
        out = np.empty(edt.shape, np.int32)
        n = ctypes.c_uint32()
        self._call(fn, ref(edt), ref(given), ctypes.byref(options), ref(out, True), ctypes.byref(n))
        return out, n.value

    def markers(self, edt, mask, min_distance=3, smooth_sigma=0.0, trim=(), saddle_iterations=20,
                nearby_factor=1.0, spacing=None):
        """peak_local_max(edt, min_distance, exclude_border=False, labels=26-connected
        components of mask), numbered 1..n in C order: (int32 volume, n). smooth_sigma:
        the peak search sees gaussian_filter(edt, sigma). trim: any of "saddles",
        "nearby" (SNOW's trims, see trim_markers), applied to the peaks found."""
        e = self._vol(edt, ("float32",), "edt")
        m = self._vol(mask, ("uint8",), "mask")
        o = self._marker_options(trim, saddle_iterations, nearby_factor, spacing)
        o.min_distance = min_distance
        o.smooth_sigma = smooth_sigma
        return self._numbered(lib.accel_ct_markers, e, m, o)

    def trim_markers(self, edt, peaks, trim=("saddles", "nearby"), saddle_iterations=20, nearby_factor=1.0,
                     spacing=None):
        """SNOW's trims of given peaks (nonzero voxels) with PoreSpy 3's rules
        (trim_saddle_points, trim_nearby_peaks): (int32 volume numbered by 26-connected
        group in C order, n)."""
        e = self._vol(edt, ("float32",), "edt")
        pk = self._vol(peaks, ("int32",), "peaks")
        o = self._marker_options(trim, saddle_iterations, nearby_factor, spacing)
        return self._numbered(lib.accel_ct_trim_markers, e, pk, o)

    @staticmethod
    def _trim_flags(trim):
        if isinstance(trim, str):
            trim = (trim,)
        flags = 0
        for t in trim:
            if t not in TRIMS:
                raise ValueError("unknown trim %r (saddles, nearby)" % (t,))
            flags |= TRIMS[t]
        return flags

    def _marker_options(self, trim, saddle_iterations, nearby_factor, spacing):
        o = CtMarkerOptions.defaults()
        o.trim = self._trim_flags(trim)
        o.saddle_iterations = saddle_iterations
        o.nearby_factor = nearby_factor
        if spacing is not None:
            for i in range(3):
                o.spacing[i] = float(spacing[i])
        return o

    def watershed(self, image, markers, mask=None, ties="skimage", progress=None):
        """skimage.segmentation.watershed(image, markers, mask=mask) (connectivity 1):
        int32 labels. ties: "skimage" (its heap's order of equal markers) or "stable"
        (equal markers in C order)."""
        import numpy as np
        im = self._vol(image, ("float32",), "image")
        mk = self._vol(markers, ("int32",), "markers")
        o = CtWatershedOptions.defaults()
        o.ties = TIES[ties]
        cb = progress_fn(progress)
        if cb is not None:
            o.progress = cb
        m = None if mask is None else self._vol(mask, ("uint8",), "mask")
        out = np.empty(im.shape, np.int32)
        self._call(lib.accel_ct_watershed, ref(im), ref(mk), ref(m), ctypes.byref(o), ref(out, True))
        return out

    def network(self, labels, edt, spacing=None):
        """The pore network: {"porosity", "regions": [dict...], "throats": [dict...]}."""
        lab = self._vol(labels, ("int32",), "labels")
        e = self._vol(edt, ("float32",), "edt")
        h = ctypes.c_void_p()
        self._call(lib.accel_ct_network_build, ref(lab), ref(e), self._spacing(spacing), ctypes.byref(h))
        return _network_dict(h)

    def _pipeline_options(self, volume, threshold, compare, pores, spacing, min_distance, smooth_sigma, ties,
                          fill_connectivity, slope, intercept, trim, saddle_iterations, nearby_factor):
        """The pipeline's options, and the per-slice arrays they point to (keep them)."""
        o = CtPipelineOptions.defaults()
        keep = []
        if slope is not None or intercept is not None:
            nz = volume.shape[0]
            sl = _per_slice(1.0 if slope is None else slope, nz)
            ic = _per_slice(0.0 if intercept is None else intercept, nz)
            keep += [sl, ic]
            o.slope = sl.ctypes.data_as(ctypes.POINTER(ctypes.c_double))
            o.intercept = ic.ctypes.data_as(ctypes.POINTER(ctypes.c_double))
        o.threshold = float(threshold)
        o.compare = COMPARES[compare]
        o.fill_connectivity = int(fill_connectivity)
        o.pores = PORES[pores]
        for i in range(3):
            o.spacing[i] = float(spacing[i])
        o.min_distance = min_distance
        o.smooth_sigma = smooth_sigma
        o.ties = TIES[ties]
        o.trim = self._trim_flags(trim)
        o.saddle_iterations = saddle_iterations
        o.nearby_factor = nearby_factor
        return o, keep

    @staticmethod
    def _outputs(shape, outputs):
        """The accel_ct_outputs for the requested outputs, the numpy arrays they
        fill (by name), what must stay alive, and the network handle's holder."""
        import numpy as np
        out = CtOutputs.defaults()
        result, descs = {}, []
        for name in outputs:
            if name == "network":
                continue
            if name not in _OUTPUT_DTYPES:
                raise ValueError("unknown output %r" % name)
            result[name] = np.empty(shape, _OUTPUT_DTYPES[name])
            d = as_array(result[name], True)
            descs.append(d)
            setattr(out, name, ctypes.cast(ctypes.pointer(d), ctypes.c_void_p))
        net = ctypes.c_void_p()
        if "network" in outputs:
            out.network = ctypes.pointer(net)
        return out, result, descs, net

    def pipeline(self, volume, threshold, compare=">", pores="closed", spacing=(1.0, 1.0, 1.0), min_distance=3,
                 smooth_sigma=0.0, ties="skimage", fill_connectivity=6, slope=None, intercept=None, markers=None,
                 outputs=("filled", "pores", "edt", "markers", "labels", "network"), progress=None, trim=(),
                 saddle_iterations=20, nearby_factor=1.0):
        """The whole chain in one call (one upload and one download per output on a GPU):
        a dict with the requested outputs among solid, filled, pores, edt, markers,
        labels, network, plus "marker_count"."""
        v = self._volume(volume)
        o, keep = self._pipeline_options(v, threshold, compare, pores, spacing, min_distance, smooth_sigma, ties,
                                         fill_connectivity, slope, intercept, trim, saddle_iterations, nearby_factor)
        cb = progress_fn(progress)
        if cb is not None:
            o.progress = cb
        p = ctypes.c_void_p()
        self._call(lib.accel_ct_pipeline_create, ctypes.byref(o), ctypes.byref(p))
        try:
            out, result, descs, net = self._outputs(v.shape, outputs)
            mk = None if markers is None else self._vol(markers, ("int32",), "markers")
            check(lib.accel_ct_pipeline_run(p, ref(v), ref(mk), ctypes.byref(out)), self._h())
            if "network" in outputs:
                result["network"] = _network_dict(net)
            result["marker_count"] = out.marker_count
            return result
        finally:
            lib.accel_ct_pipeline_destroy(p)
