"""CT pore segmentation on numpy volumes (include/accel/ct.h, docs/ct.md): the
stages and the pipeline of ctx.ct, and the pore network as a dict."""
import ctypes
import numbers
from typing import Any, Callable, Dict, Iterable, Optional, Sequence, Tuple, Union, cast

from ._arrays import Array, as_array, device_empty, device_in, host, integer_as, mask_u8, real_as_f32, ref
from ._errors import ContextCalls, check, choice
from ._native import P, c_status, c_struct, declare, lib
from ._progress import Call, ProgressArg

Spacing = Union[None, float, Sequence[float]]

COMPARES = {">": 0, ">=": 1, "<": 2, "<=": 3}
PORES = {"closed": 0, "all": 1}
TIES = {"skimage": 0, "stable": 1}
TRIMS = {"saddles": 1, "nearby": 2}
PEAK_RULES = {"0.19": 0, "0.22": 1}

CtMarkerOptions = c_struct("accel_ct_marker_options", """
    uint32_t struct_size; int32_t min_distance; double smooth_sigma; accel_progress_fn progress;
    void *progress_user; uint32_t trim; int32_t saddle_iterations; double nearby_factor; double spacing[3];
    uint32_t values; uint32_t order; uint32_t rules; int32_t exclude_border[3]; double threshold_abs;
    double threshold_rel; int64_t num_peaks; int64_t num_peaks_per_label; const accel_array *footprint;
    const accel_array *labels; double p_norm; double background;""")
CtWatershedOptions = c_struct("accel_ct_watershed_options", """
    uint32_t struct_size; accel_ct_ties ties; accel_progress_fn progress; void *progress_user;
    uint32_t connectivity; uint32_t watershed_line; double compactness;""")
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
    "accel_ct_feature_transform": (c_status, [_CTX, P(Array), _ADDR, P(Array), P(Array)]),
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


def _per_slice(value: Any, nz: int) -> Any:
    """A scalar, or one value per slice, as nz contiguous float64 values."""
    import numpy as np
    return np.ascontiguousarray(np.broadcast_to(np.asarray(value, float), (nz,)))


def _network_dict(h: Any) -> Dict[str, Any]:
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


_DIM_NAMES = {1: "1-D", 2: "2-D", 3: "3-D"}


def _volume_dtype(a: Any, what: str) -> Any:
    """A threshold input in a dtype the library takes, by the documented rule:
    uint8, int16, uint16, int32 and float32 as they are; bool as uint8 (a
    view); int8 as int16; other integers as int32 when every value fits
    (else ValueError); float16 and float64 as float32 (rounded to nearest)."""
    import numpy as np
    if a.dtype == np.bool_:
        return a.view(np.uint8)
    if a.dtype.name in _VOLUME_DTYPES and a.dtype.isnative:
        return a
    if a.dtype == np.int8:
        return a.astype(np.int16)
    if a.dtype.kind in "iu":
        return integer_as(a, "int32", what)
    return real_as_f32(a, what)


def _sampling(sampling: Spacing, ndim: int, what: str = "sampling") -> Optional[Tuple[float, ...]]:
    """Voxel size as ndim floats: None stays None; a scalar is every axis'."""
    if sampling is None:
        return None
    if isinstance(sampling, numbers.Real):
        return (float(sampling),) * ndim
    values = tuple(float(x) for x in cast(Sequence[float], sampling))
    if len(values) != ndim:
        raise ValueError("%s has %d values for a %d-D input (one per axis, or one scalar)"
                         % (what, len(values), ndim))
    return values


def _c_spacing(values: Optional[Tuple[float, ...]]) -> Any:
    """A C double[3] of a spacing padded to 3-D with 1.0 for the missing leading axes (None: NULL)."""
    if values is None:
        return None
    return (ctypes.c_double * 3)(*((1.0,) * (3 - len(values)) + values))


def _spacing_arg(sampling: Spacing, spacing: Spacing) -> Spacing:
    if sampling is not None and spacing is not None:
        raise TypeError("give sampling or spacing (its older name), not both")
    return spacing if sampling is None else sampling


def _fill_connectivity(connectivity: Optional[int], structure: Any, ndim: int) -> int:
    """The library's 6, 18 or 26 for a fill of an ndim-D mask embedded in 3-D:
    connectivity as scikit-image counts it (1: faces ... ndim: full), the
    neighbour counts (4, 8 in 2-D; 6, 26 in 3-D), or SciPy's structure."""
    import numpy as np
    if structure is not None:
        if connectivity is not None:
            raise TypeError("give connectivity or structure, not both")
        st = np.asarray(structure, dtype=bool)
        cross = np.zeros((3,) * ndim, bool)
        for axis in range(ndim):
            idx = [1] * ndim
            for v in (0, 1, 2):
                idx[axis] = v
                cross[tuple(idx)] = True
        steps = sum(np.abs(np.indices((3,) * ndim) - 1))
        for k, conn in ((1, 6), (2, 18), (3, 26)):
            if k <= ndim and st.shape == cross.shape and np.array_equal(st, steps <= k):
                return 26 if k == ndim else conn  # the full block of a 1-D or 2-D mask: every neighbour
        raise NotImplementedError("fill_holes takes SciPy's generate_binary_structure(ndim, k) structures (the "
                                  "face-connected default, faces and edges, the full 3x...x3 block); other "
                                  "structures are not implemented")
    if connectivity is None:
        return 6
    allowed = {1: {1: 6, 2: 6}, 2: {1: 6, 4: 6, 2: 26, 8: 26}, 3: {1: 6, 6: 6, 2: 18, 18: 18, 3: 26, 26: 26}}[ndim]
    if connectivity not in allowed:
        raise ValueError("connectivity for a %s mask must be one of %s, not %r"
                         % (_DIM_NAMES[ndim], ", ".join(str(k) for k in sorted(allowed)), connectivity))
    return allowed[connectivity]


def _border_width(ndim: int, min_distance: int, exclude_border: Any) -> Tuple[int, ...]:
    """peak_local_max's exclude_border as one width per axis (its checks and errors)."""
    if isinstance(exclude_border, bool):
        return (min_distance if exclude_border else 0,) * ndim
    if isinstance(exclude_border, int):
        if exclude_border < 0:
            raise ValueError("`exclude_border` cannot be a negative value")
        return (exclude_border,) * ndim
    if isinstance(exclude_border, tuple):
        if len(exclude_border) != ndim:
            raise ValueError("`exclude_border` should have the same length as the dimensionality of the image.")
        for exclude in exclude_border:
            if not isinstance(exclude, int):
                raise ValueError("`exclude_border`, when expressed as a tuple, must only contain ints.")
            if exclude < 0:
                raise ValueError("`exclude_border` can not be a negative value")
        return tuple(exclude_border)
    raise TypeError("`exclude_border` must be bool, int, or tuple with the same length as the dimensionality of "
                    "the image.")


def _count(what: str, value: Any) -> int:
    """A whole number >= 0 that fits int32."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 0 <= int(value) < 2 ** 31:
        raise ValueError("%s must be an integer >= 0, not %r" % (what, value))
    return int(value)


def _limit(what: str, value: Any) -> int:
    """A peak count limit: inf as -1 (none), else int(value) >= 0."""
    if isinstance(value, numbers.Real) and value == float("inf"):
        return -1
    if not isinstance(value, numbers.Real) or value != value or value < 0:
        raise ValueError("%s must be >= 0 or inf, not %r" % (what, value))
    return int(value)


def _interior(labels: Any, border: Sequence[int]) -> Any:
    """labels > 0 without the excluded border."""
    keep = labels > 0
    for axis, width in enumerate(border):
        if width:
            index = [slice(None)] * labels.ndim
            index[axis] = slice(None, width)
            keep[tuple(index)] = False
            index[axis] = slice(-width, None)
            keep[tuple(index)] = False
    return keep


class CT(ContextCalls):
    """CT pore segmentation on arrays indexed (z, y, x) (include/accel/ct.h).

    The semantics are SciPy's (fill_holes, edt) and scikit-image 0.19.3's
    (markers = peak_local_max, watershed), reproduced exactly. Inputs are
    numpy arrays of any strides or host DLPack arrays (results come back as
    the same kind); masks may have any numeric dtype (nonzero = true).
    threshold, fill_holes, edt, markers, peak_local_max and watershed also
    take 1-D and 2-D arrays with their own dimensionality; the other stages
    are 3-D only.

    Examples
    --------
    >>> import accel, numpy as np
    >>> vol = np.zeros((5, 5, 5), np.uint8); vol[2, 2, 2] = 200
    >>> with accel.Context() as ctx:
    ...     int(ctx.ct.threshold(vol, 100).sum())
    1
    """

    @staticmethod
    def _in(a: Any, what: str, ndims: Iterable[int] = (3,)) -> Tuple[Any, Callable[[Any], Any]]:
        """(numpy array, back) of an input, its dimensionality checked."""
        arr, back = host(a, what)
        ndims = tuple(ndims)
        if arr.ndim not in ndims:
            if ndims == (3,):
                raise ValueError("%s must be a 3-D volume (z, y, x), not %d-D" % (what, arr.ndim))
            raise ValueError("%s must be %s, not %d-D" % (what, " or ".join(_DIM_NAMES[n] for n in ndims),
                                                            arr.ndim))
        return arr, back

    @staticmethod
    def _as3d(a: Any) -> Any:
        """A 1-D or 2-D array as a volume with leading axes of 1 (a view)."""
        return a.reshape((1,) * (3 - a.ndim) + a.shape) if a.ndim < 3 else a

    def rescale(self, volume: Any, slope: Any = None, intercept: Any = None) -> Any:
        """DICOM's rescale: ``volume * slope[z] + intercept[z]`` as float32.

        Parameters
        ----------
        volume : array
            int16 or uint16 (z, y, x), or one (y, x) slice; bool, uint8 and
            int8 are taken as int16.
        slope, intercept : float or sequence of float, optional
            Per slice, or one value for all (default 1 and 0).

        Returns
        -------
        array
            float32, the volume's shape.

        Examples
        --------
        >>> import accel, numpy as np
        >>> with accel.Context() as ctx:
        ...     ctx.ct.rescale(np.full((2, 1, 1), 10, np.int16), slope=[1, 2], intercept=-1).ravel().tolist()
        [9.0, 19.0]
        """
        import numpy as np
        v, back = self._in(volume, "volume", (2, 3))
        shape = v.shape
        v = self._as3d(v)  # a slice is a volume of one
        if v.dtype.name not in ("int16", "uint16") or not v.dtype.isnative:
            if v.dtype.name not in ("bool", "uint8", "int8"):
                raise TypeError("volume must be int16 or uint16 (DICOM's stored values), not %s" % v.dtype)
            v = v.astype(np.int16)
        nz = v.shape[0]
        sl = None if slope is None else _per_slice(slope, nz)
        ic = None if intercept is None else _per_slice(intercept, nz)
        out = np.empty(v.shape, np.float32)
        self._call(lib.accel_ct_rescale, ref(v), None if sl is None else sl.ctypes.data,
                   None if ic is None else ic.ctypes.data, ref(out, True))
        return back(out.reshape(shape))

    def threshold(self, volume: Any, threshold: float, compare: str = ">") -> Any:
        """``volume <compare> threshold`` as a bool array.

        Parameters
        ----------
        volume : array
            1-D, 2-D or 3-D. uint8, int16, uint16, int32 and float32 are
            compared as they are; bool as uint8, int8 as int16, other integers
            as int32 when every value fits (else ValueError), float16 and
            float64 as float32 (a float64 value within float32 rounding of the
            threshold may compare as its rounded value does).
        threshold : float
        compare : {">", ">=", "<", "<="}

        Returns
        -------
        array
            bool, the volume's shape.

        Examples
        --------
        >>> import accel, numpy as np
        >>> with accel.Context() as ctx:
        ...     ctx.ct.threshold(np.array([1, 5, 9]), 5, ">=").tolist()
        [False, True, True]
        """
        import numpy as np
        op = choice("compare", COMPARES, compare)
        dv = device_in(self._ctx, volume, _VOLUME_DTYPES, (1, 2, 3))
        if dv is not None:  # a GPU array in place, the result on its device
            res = device_empty(volume, dv.shape, "bool")
            self._call(lib.accel_ct_threshold, dv.ref(), float(threshold), op, res.ref())
            return res.obj
        v, back = self._in(volume, "volume", (1, 2, 3))
        shape = v.shape
        v = self._as3d(_volume_dtype(v, "volume"))
        out = np.empty(v.shape, bool)
        self._call(lib.accel_ct_threshold, ref(v), float(threshold), op, ref(out, True))
        return back(out.reshape(shape))

    def fill_holes(self, mask: Any, connectivity: Optional[int] = None, structure: Any = None,
                   axes: Optional[Sequence[int]] = None) -> Any:
        """scipy.ndimage.binary_fill_holes: the mask plus every background
        element not connected to the array's border through background.

        Parameters
        ----------
        mask : array
            1-D, 2-D or 3-D, any numeric dtype (nonzero = true).
        connectivity : int, optional
            As scikit-image counts it: 1 (faces; SciPy's default) or ndim
            (faces, edges and corners); also the neighbour counts 4 and 8 in
            2-D, 6, 18 and 26 in 3-D (2 in 3-D: faces and edges).
        structure : array, optional
            SciPy's structuring element instead: the face-connected one or a
            full 3 x ... x 3 block.
        axes : sequence of int, optional
            As SciPy's ``axes``: fill within the subspaces of these axes only
            (each slice along the other axes on its own; `structure` then has
            ``len(axes)`` dimensions). Default: every axis.

        Returns
        -------
        array
            bool, the mask's shape.

        Notes
        -----
        A 2-D (or 1-D) mask is solved as the middle slice of a volume whose
        other slices are foreground: no path through background leaves the
        slice, and its border is the 2-D image's border, so the result is
        SciPy's 2-D result exactly (a plain (1, H, W) volume would not be:
        every pixel of it touches a z face).

        Examples
        --------
        >>> import accel, numpy as np
        >>> ring = np.ones((3, 3), int); ring[1, 1] = 0
        >>> with accel.Context() as ctx:
        ...     bool(ctx.ct.fill_holes(ring).all())
        True
        """
        import numpy as np
        dv = device_in(self._ctx, mask, ("uint8",)) if axes is None else None
        if dv is not None:  # a 3-D GPU mask in place, the result on its device
            conn = _fill_connectivity(connectivity, structure, 3)
            res = device_empty(mask, dv.shape, "bool")
            self._call(lib.accel_ct_fill_holes, dv.ref(), conn, res.ref())
            return res.obj
        m, back = self._in(mask, "mask", (1, 2, 3))
        if axes is not None:
            picked = sorted({int(a) % m.ndim for a in np.atleast_1d(axes)})
            if len(picked) != len(np.atleast_1d(axes)):
                raise ValueError("axes %s repeat an axis" % (list(np.atleast_1d(axes)),))
            if len(picked) < m.ndim:
                other = [a for a in range(m.ndim) if a not in picked]
                moved = np.moveaxis(m, other, list(range(len(other))))
                out = np.empty(moved.shape, bool)
                for idx in np.ndindex(*moved.shape[:len(other)]):
                    out[idx] = self.fill_holes(moved[idx], connectivity, structure)
                return back(np.ascontiguousarray(np.moveaxis(out, list(range(len(other))), other)))
        conn = _fill_connectivity(connectivity, structure, m.ndim)
        m = mask_u8(m)
        if m.ndim == 3:
            out = np.empty(m.shape, bool)
            self._call(lib.accel_ct_fill_holes, ref(m), conn, ref(out, True))
            return back(out)
        if m.size == 0:
            return back(m.astype(bool))
        if m.ndim == 2:
            vol = np.ones((3,) + m.shape, np.uint8)
            vol[1] = m != 0
        else:
            vol = np.ones((3, 3) + m.shape, np.uint8)
            vol[1, 1] = m != 0
        out = np.empty(vol.shape, bool)
        self._call(lib.accel_ct_fill_holes, ref(vol), conn, ref(out, True))
        return back(np.ascontiguousarray(out[1] if m.ndim == 2 else out[1, 1]))

    def edt(self, mask: Any, sampling: Spacing = None, *, spacing: Spacing = None, dtype: Any = None,
            return_distances: bool = True, return_indices: bool = False) -> Any:
        """scipy.ndimage.distance_transform_edt(mask, sampling=sampling, ...).

        Parameters
        ----------
        mask : array
            1-D, 2-D or 3-D, any numeric dtype (nonzero = true).
        sampling : float or sequence of float, optional
            The element size along each axis, or one value for all (default 1).
        spacing : float or sequence of float, optional
            The older name of `sampling`.
        dtype : {numpy.float32, numpy.float64}, optional
            float32 (default): SciPy's distances rounded to float32, by the
            fast transform (on the GPU where there is one). float64: SciPy's
            float64 distances to the bit, derived from the feature transform
            as SciPy derives them (on the GPU when it fits the budget).
        return_distances, return_indices : bool
            As SciPy: the distances, the feature transform (int32 of shape
            ``(mask.ndim,) + mask.shape``: for each element the index of the
            zero element SciPy picks as nearest), or both as a tuple. The
            indices come from SciPy's algorithm, ties included.

        Returns
        -------
        array or (array, array)
            Each nonzero element's distance to the nearest zero element; +inf
            everywhere in float32 for a mask without zeros (float64 and the
            indices then follow SciPy's placeholder feature, index -1 on the
            first axis).

        Examples
        --------
        >>> import accel, numpy as np
        >>> with accel.Context() as ctx:
        ...     ctx.ct.edt(np.array([0, 1, 1, 1, 1]), sampling=0.5).tolist()
        ...     d, i = ctx.ct.edt(np.array([[0, 1, 1]]), dtype=np.float64, return_indices=True)
        [0.0, 0.5, 1.0, 1.5, 2.0]
        >>> d.tolist(), i[1].tolist()
        ([[0.0, 1.0, 2.0]], [[0, 0, 0]])
        """
        import numpy as np
        if not (return_distances or return_indices):
            raise ValueError("at least one of return_distances and return_indices must be True")
        want64 = np.dtype(dtype or np.float32)
        if want64 not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise TypeError("dtype must be float32 or float64, not %s" % want64)
        dv = device_in(self._ctx, mask, ("uint8",), (1, 2, 3))
        if dv is not None and not return_indices and want64 == np.float32:  # in place, the result on its device
            sp = _c_spacing(_sampling(_spacing_arg(sampling, spacing), len(dv.shape)))
            res = device_empty(mask, dv.shape, "float32")
            self._call(lib.accel_ct_edt, dv.ref(), sp, res.ref())
            return res.obj
        m, back = self._in(mask, "mask", (1, 2, 3))
        sp = _c_spacing(_sampling(_spacing_arg(sampling, spacing), m.ndim))
        shape, rank = m.shape, m.ndim
        m = self._as3d(mask_u8(m))
        if not return_indices and want64 == np.float32:
            out = np.empty(m.shape, np.float32)
            self._call(lib.accel_ct_edt, ref(m), sp, ref(out, True))
            return back(out.reshape(shape))
        ind = np.empty((3,) + m.shape, np.int32) if return_indices else None
        dist = np.empty(m.shape, np.float64) if return_distances else None
        if m.size and m.all():
            # no zero element: SciPy's placeholder feature, -1 on the array's own first axis
            ind, dist = self._placeholder(shape, _sampling(_spacing_arg(sampling, spacing), rank), ind, dist)
        else:
            self._call(lib.accel_ct_feature_transform, ref(m), sp, None if ind is None else ref(ind, True),
                       None if dist is None else ref(dist, True))
            ind = None if ind is None else ind[3 - rank:].reshape((rank,) + shape)
            dist = None if dist is None else dist.reshape(shape)
        if dist is not None and want64 == np.float32:
            dist = dist.astype(np.float32)
        if ind is None:
            return back(dist)
        return back(ind) if dist is None else (back(dist), back(ind))

    @staticmethod
    def _placeholder(shape: Tuple[int, ...], sampling: Any, ind: Any, dist: Any) -> Tuple[Any, Any]:
        """SciPy's feature transform of an array without zeros: the feature
        (-1, 0, ...) everywhere, and the distances to it as SciPy computes them."""
        import numpy as np
        ft = np.zeros((len(shape),) + shape, np.int32)
        ft[0] = -1
        if dist is not None:
            dt = (ft - np.indices(shape, dtype=np.int32)).astype(np.float64)
            scale = np.asarray(1.0 if sampling is None else sampling, np.float64)
            for k, s in enumerate(np.broadcast_to(scale, (len(shape),))):
                dt[k] *= s
            dist = np.sqrt(np.add.reduce(dt * dt, axis=0))
        return (ft if ind is not None else None), dist

    def _numbered(self, fn, edt, given, options, call=None):
        """fn(edt, given, options) writing an int32 volume and its count: (volume, n)."""
        import numpy as np
        out = np.empty(edt.shape, np.int32)
        n = ctypes.c_uint32()
        with call or Call(None) as c:
            options.progress = c.fn
            self._call(fn, ref(edt), ref(given), ctypes.byref(options), ref(out, True), ctypes.byref(n))
        return out, n.value

    def _edt_3d(self, edt: Any) -> Tuple[Any, Callable[[Any], Any]]:
        e, back = self._in(edt, "edt")
        return real_as_f32(e, "edt"), back

    def markers(self, edt: Any, mask: Any, min_distance: int = 3, smooth_sigma: float = 0.0,
                trim: Union[str, Sequence[str]] = (), saddle_iterations: int = 20, nearby_factor: float = 1.0,
                spacing: Spacing = None, progress: ProgressArg = None) -> Tuple[Any, int]:
        """Pore markers: scikit-image's peak_local_max, optionally trimmed as SNOW does.

        ``peak_local_max(edt, min_distance, exclude_border=False,
        labels=label(mask, connectivity=3))``, numbered 1..n in C order.

        1-D and 2-D maps follow peak_local_max's rules for their own
        dimensionality (components of full connectivity, the window and the
        flat-region opening of that rank); :meth:`peak_local_max` takes every
        other parameter.

        Parameters
        ----------
        edt : array
            The distance map, 1-D, 2-D or 3-D, real (taken as float32), finite, >= 0.
        mask : array
            Of the map's shape, any numeric dtype (nonzero = true).
        min_distance : int
        smooth_sigma : float
            The peak search sees ``gaussian_filter(edt, sigma)`` (0: none; 3-D only).
        trim : str or sequence of {"saddles", "nearby"}
            SNOW's trims (see :meth:`trim_markers`) of the peaks found (2-D
            and 3-D).
        saddle_iterations, nearby_factor, spacing
            The trims' parameters (spacing: a scalar or one value per axis).
        progress : None, True or callable(stage, fraction)

        Returns
        -------
        (array, int)
            int32 markers, the mask's shape, and their number.

        Raises
        ------
        NotImplementedError
            For smoothing of a 1-D or 2-D map, or trims of a 1-D one.

        Examples
        --------
        >>> import accel, numpy as np
        >>> mask = np.zeros((7, 7, 7), np.uint8); mask[1:6, 1:6, 1:6] = 1
        >>> with accel.Context() as ctx:
        ...     edt = ctx.ct.edt(mask)
        ...     ctx.ct.markers(edt, mask)[1]
        1
        """
        e, back = self._in(edt, "edt", (1, 2, 3))
        e = real_as_f32(e, "edt")
        m = mask_u8(self._in(mask, "mask", (e.ndim,))[0])
        o = self._marker_options(trim, saddle_iterations, nearby_factor, spacing, e.ndim)
        if (e.ndim != 3 and smooth_sigma > 0) or (e.ndim == 1 and o.trim):
            raise NotImplementedError("smoothing takes a 3-D map and the trims a 2-D or 3-D one, not %d-D" % e.ndim)
        trims = o.trim if e.ndim == 2 else 0  # 2-D: the peaks, then the trims of a one-plane volume
        o.trim = 0 if trims else o.trim
        o.min_distance = min_distance
        o.smooth_sigma = smooth_sigma
        out, n = self._numbered(lib.accel_ct_markers, e, m, o, Call(progress))
        if trims:
            o.trim = trims
            out, n = self._numbered(lib.accel_ct_trim_markers, self._as3d(e), self._as3d(out), o)
            out = out.reshape(e.shape)
        return back(out), n

    def peak_local_max(self, image: Any, min_distance: int = 1, threshold_abs: Optional[float] = None,
                       threshold_rel: Optional[float] = None, exclude_border: Any = True,
                       num_peaks: float = float("inf"), footprint: Any = None, labels: Any = None,
                       num_peaks_per_label: float = float("inf"), p_norm: float = float("inf"), *,
                       rules: str = "0.19") -> Any:
        """scikit-image's ``peak_local_max``, every parameter, as 0.19.3 computes it.

        The coordinates of the peaks, in the order scikit-image returns them
        (strongest first, equal values in numpy 1.x's quicksort order; with
        labels, label by label). 1-D, 2-D and 3-D images, each with its own
        dimensionality. docs/ct.md lists the rules and what later releases of
        scikit-image changed (``rules="0.22"`` follows those).

        Parameters
        ----------
        image : array
            1-D, 2-D or 3-D, real or integer, without NaN. float32 is searched
            as float32, other dtypes as float64 (integers beyond 2**53 are refused).
        min_distance : int
            Peaks closer than this (in the p-norm) to a stronger kept one are dropped;
            the window is the ``2 * min_distance + 1`` cube unless `footprint` is given.
        threshold_abs, threshold_rel : float, optional
            Peaks must exceed ``max(threshold_abs or image.min(), threshold_rel * image.max())``.
        exclude_border : bool, int or tuple of int
            Peaks this close to the border are dropped (True: min_distance).
        num_peaks : int or inf
            At most this many peaks, the strongest.
        footprint : array of bool, optional
            The window (the image's dimensionality; centred at ``shape // 2``).
        labels : array of int, optional
            Regions by value (> 0), searched separately.
        num_peaks_per_label : int or inf
            At most this many peaks per region.
        p_norm : float
            The Minkowski norm of the minimum distance, >= 1 (inf: Chebyshev).
        rules : {"0.19", "0.22"}
            "0.22": scikit-image 0.22 and later (the window sees the nearest
            voxel beyond the border, equal values in C order).

        Returns
        -------
        array
            (n, image.ndim) int64 coordinates.

        Raises
        ------
        NotImplementedError
            For 4-D and larger images, and for thresholds below the lowest
            value of an integer dtype (where scikit-image's ``-image`` wraps).

        Examples
        --------
        >>> import accel, numpy as np
        >>> img = np.zeros((7, 7)); img[3, 4] = 1; img[3, 2] = 1.5
        >>> with accel.Context() as ctx:
        ...     ctx.ct.peak_local_max(img, min_distance=1).tolist()
        [[3, 2], [3, 4]]
        """
        import numpy as np
        im, _ = host(image, "image")
        if im.ndim > 3:
            raise NotImplementedError("peak_local_max of %d-D images: the library's images are 1-D to 3-D" % im.ndim)
        im3, values, background = self._peak_image(im)
        if (footprint is None or np.asarray(footprint).size == 1) and min_distance < 1:
            import warnings
            warnings.warn("When min_distance < 1, peak_local_max acts as finding "
                          "image > max(threshold_abs, threshold_rel * max(image)).", RuntimeWarning, stacklevel=2)
        border = _border_width(im.ndim, min_distance, exclude_border)
        if im.dtype.kind in "iub" and threshold_abs is not None and threshold_abs < background:
            raise NotImplementedError("a threshold below %s's lowest value (scikit-image's -image wraps around)"
                                      % im.dtype)
        o = CtMarkerOptions.defaults()
        o.min_distance = _count("min_distance", min_distance)
        o.values, o.order, o.rules = 1, 1, choice("rules", PEAK_RULES, rules)
        for i, b in enumerate(border):
            o.exclude_border[i] = b
        o.threshold_abs = float("nan") if threshold_abs is None else float(threshold_abs)
        o.threshold_rel = float("nan") if threshold_rel is None else float(threshold_rel)
        o.num_peaks, o.num_peaks_per_label = _limit("num_peaks", num_peaks), _limit("num_peaks_per_label",
                                                                                      num_peaks_per_label)
        if not float(p_norm) >= 1:
            raise ValueError("p_norm must be >= 1 (scipy's KD-tree takes 1 <= p <= inf), not %r" % (p_norm,))
        o.p_norm, o.background = float(p_norm), background
        keep = []
        if footprint is not None:
            fp = np.asarray(footprint)
            if fp.ndim != im.ndim:
                raise RuntimeError("footprint array has incorrect shape.")
            fp = (fp != 0).astype(np.uint8)
            keep.append(as_array(fp))
            o.footprint = ctypes.addressof(keep[-1])
        lab = None
        if labels is not None:
            lab = np.asarray(labels)
            if lab.dtype.kind not in "iub":
                raise TypeError("Cannot cast array data from dtype(%r) to dtype('int64') according to the rule "
                                "'safe'" % lab.dtype.name)
            if lab.shape != im.shape:
                raise ValueError("labels has shape %s, the image %s" % (lab.shape, im.shape))
            lab = integer_as(lab, "int32", "labels")
            keep.append(as_array(lab))
            o.labels = ctypes.addressof(keep[-1])
        out, n = self._numbered(lib.accel_ct_markers, im3, None, o)
        flat = np.flatnonzero(out)
        coords = np.stack(np.unravel_index(flat[np.argsort(out.ravel()[flat])], im.shape), axis=1).astype(np.intp)
        coords = coords.reshape(n, im.ndim)
        if lab is not None and n == 0 and not _interior(lab, border).any():
            return np.empty((0, 2), dtype=int)  # scikit-image's shape when no region remains
        return coords

    @staticmethod
    def _peak_image(im: Any) -> Tuple[Any, int, float]:
        """The image as the library searches it, its values kind and the
        background scikit-image gives other regions (the dtype's lowest)."""
        import numpy as np
        if im.dtype.kind == "f":
            lowest = float(np.finfo(im.dtype).min)
            return (im if im.dtype == np.float32 and im.dtype.isnative else
                    im.astype(np.float32 if im.dtype.itemsize < 4 else np.float64)), 1, lowest
        if im.dtype.kind == "b":
            return im.astype(np.float64), 1, 0.0
        if im.dtype.kind not in "iu":
            raise TypeError("image must be real numbers, not %s" % im.dtype)
        if im.dtype.itemsize == 8 and im.size and (int(im.max()) > 2 ** 53 or int(im.min()) < -2 ** 53):
            raise NotImplementedError("integer images beyond 2**53 (searched as float64, they would lose values)")
        return im.astype(np.float64), 1, float(np.iinfo(im.dtype).min)

    def trim_markers(self, edt: Any, peaks: Any, trim: Union[str, Sequence[str]] = ("saddles", "nearby"),
                     saddle_iterations: int = 20, nearby_factor: float = 1.0,
                     spacing: Spacing = None) -> Tuple[Any, int]:
        """SNOW's trims of given peaks with PoreSpy 3's rules.

        2-D images follow PoreSpy's 2-D rules (a 3 x 3 square, 4-connected
        groups for the saddles, 8-connected for the nearby peaks and the
        numbering), as a volume of one plane computes them.

        Parameters
        ----------
        edt : array
            The distance map, 2-D or 3-D, real (taken as float32).
        peaks : array
            Integers of the map's shape (nonzero = a peak voxel).
        trim : str or sequence of {"saddles", "nearby"}
            trim_saddle_points and trim_nearby_peaks.
        saddle_iterations : int
        nearby_factor : float
        spacing : float or sequence of one value per axis, optional

        Returns
        -------
        (array, int)
            int32 of the map's shape, numbered by fully connected group in C
            order, and the count.

        Examples
        --------
        >>> import accel, numpy as np
        >>> edt = np.zeros((5, 5, 5), np.float32); edt[2, 2, 2] = 2; edt[2, 2, 1] = 1
        >>> peaks = (edt > 0).astype(np.int32)
        >>> with accel.Context() as ctx:
        ...     ctx.ct.trim_markers(edt, peaks, trim="saddles")[1]
        1
        >>> with accel.Context() as ctx:  # a 2-D image
        ...     ctx.ct.trim_markers(edt[2], peaks[2], trim="saddles")[1]
        1
        """
        e, back = self._in(edt, "edt", (2, 3))
        e = real_as_f32(e, "edt")
        pk = integer_as(self._in(peaks, "peaks", (e.ndim,))[0], "int32", "peaks")
        o = self._marker_options(trim, saddle_iterations, nearby_factor, spacing, e.ndim)
        out, n = self._numbered(lib.accel_ct_trim_markers, self._as3d(e), self._as3d(pk), o)
        return back(out.reshape(e.shape)), n

    @staticmethod
    def _trim_flags(trim: Union[str, Sequence[str]]) -> int:
        if isinstance(trim, str):
            trim = (trim,)
        flags = 0
        for t in trim:
            flags |= choice("trim", TRIMS, t)
        return flags

    def _marker_options(self, trim, saddle_iterations, nearby_factor, spacing, ndim=3):
        o = CtMarkerOptions.defaults()
        o.trim = self._trim_flags(trim)
        o.saddle_iterations = saddle_iterations
        o.nearby_factor = nearby_factor
        sp = _sampling(spacing, ndim, "spacing")
        if sp is not None:
            sp = (1.0,) * (3 - ndim) + sp
            for i in range(3):
                o.spacing[i] = sp[i]
        return o

    def watershed(self, image: Any, markers: Any = None, mask: Any = None, ties: str = "skimage",
                  progress: ProgressArg = None, *, connectivity: int = 1, watershed_line: bool = False,
                  compactness: float = 0.0) -> Any:
        """skimage.segmentation.watershed(image, markers, connectivity, mask=mask, ...): int32 labels.

        scikit-image 0.19.3's flood, reproduced exactly, 1-D, 2-D or 3-D.

        Parameters
        ----------
        image : array
            1-D, 2-D or 3-D, real, no NaN inside the mask. float64 and
            integers wider than 16 bits are flooded in float64 (as
            scikit-image floods every image); float32, float16, bool and
            8- and 16-bit integers as float32 (exact for them).
        markers : array, int or None
            Integers of the image's shape (nonzero = a label), taken as int32;
            an int: about that many seeds on a regular grid
            (``skimage.util.regular_seeds``, the count scaled by the share of
            the image inside the mask); None (default): the image's local
            minima for the connectivity, numbered by connected group.
        mask : array, optional
            Any numeric dtype (nonzero = flood there); default everywhere.
        ties : {"skimage", "stable"}
            Order of equal values: scikit-image's heap, or C order.
        progress : None, True or callable(stage, fraction)
        connectivity : int
            Neighbours at most this many orthogonal steps away: 1 (faces,
            default), 2 (8-connected in 2-D, 18 in 3-D), 3 (26 in 3-D); above
            the image's dimensionality it means the full neighbourhood.
        watershed_line : bool
            True: a one-pixel line of 0 separates the basins.
        compactness : float
            > 0: compact watershed (priority = value + compactness x
            distance to the marker); >= 0.

        Returns
        -------
        array
            int32 labels, the image's shape.

        Raises
        ------
        ValueError
            For shapes that differ, connectivity < 1, a negative or infinite
            compactness, a marker count < 1, NaN in the image.
        NotImplementedError
            For a footprint array as connectivity.

        Examples
        --------
        >>> import accel, numpy as np
        >>> image = np.array([0.0, 1.0, 3.0, 1.0, 0.0])
        >>> with accel.Context() as ctx:
        ...     ctx.ct.watershed(image, np.array([1, 0, 0, 0, 2])).tolist()
        [1, 1, 1, 2, 2]
        >>> with accel.Context() as ctx:
        ...     ctx.ct.watershed(image, watershed_line=True).tolist()
        [1, 1, 0, 2, 2]
        """
        import numpy as np
        im, back = self._in(image, "image", (1, 2, 3))
        conn = self._watershed_connectivity(connectivity, im.ndim)
        m = None if mask is None else mask_u8(self._in(mask, "mask", (1, 2, 3))[0])
        if m is not None and m.shape != im.shape:
            raise ValueError("mask has shape %s, the image %s" % (m.shape, im.shape))
        mk = self._watershed_markers(im, markers, m, conn)
        if mk.shape != im.shape:
            raise ValueError("markers has shape %s, the image %s" % (mk.shape, im.shape))
        wide = im.dtype.kind in "iu" and im.dtype.itemsize > 2
        if im.dtype == np.float64 or wide:
            im = np.ascontiguousarray(im, np.float64)
            narrow = im.astype(np.float32)
            if np.array_equal(narrow, im):  # every value exact in float32: the same flood, the faster path
                im = narrow
        else:
            im = real_as_f32(im, "image")
        o = CtWatershedOptions.defaults()
        o.ties = choice("ties", TIES, ties)
        o.connectivity = conn
        o.watershed_line = 1 if watershed_line else 0
        o.compactness = float(compactness)
        out = np.empty(im.shape, np.int32)
        with Call(progress) as c:
            o.progress = c.fn
            self._call(lib.accel_ct_watershed, ref(im), ref(mk), ref(m), ctypes.byref(o), ref(out, True))
        return back(out)

    @staticmethod
    def _watershed_connectivity(connectivity: Any, ndim: int = 3) -> int:
        import numpy as np
        if not isinstance(connectivity, numbers.Integral):
            if getattr(connectivity, "ndim", 0):
                # scikit-image's footprint: one of generate_binary_structure(ndim, k)'s balls
                fp = np.asarray(connectivity) != 0
                steps = sum(np.abs(np.indices((3,) * ndim) - 1))
                for k in range(1, ndim + 1):
                    if fp.shape == (3,) * ndim and np.array_equal(fp, steps <= k):
                        return k
                raise NotImplementedError("watershed takes as footprint the 3^ndim neighbourhoods at most k steps "
                                          "away (scipy.ndimage.generate_binary_structure(ndim, k)); other "
                                          "footprints are not implemented")
            raise TypeError("connectivity must be an int, not %s" % type(connectivity).__name__)
        if connectivity < 1:
            raise ValueError("connectivity must be >= 1, not %d" % connectivity)
        return min(int(connectivity), 3)

    def _watershed_markers(self, im: Any, markers: Any, mask: Any, conn: int) -> Any:
        """The markers as int32 of the image's shape: given, a grid of a count, or the local minima."""
        import numpy as np
        from . import _seeds
        on = None if mask is None else mask != 0
        if markers is None:
            if im.dtype.kind not in "biuf":
                raise TypeError("image must be real numbers, not %s" % im.dtype)
            return _seeds.local_minima_markers(im, on, conn)
        if isinstance(markers, numbers.Integral) and not isinstance(markers, bool):
            return _seeds.grid_markers(im.shape, int(markers), on)
        return integer_as(self._in(markers, "markers", (1, 2, 3))[0], "int32", "markers")

    def network(self, labels: Any, edt: Any, spacing: Spacing = None) -> Dict[str, Any]:
        """The pore network of a label image.

        Parameters
        ----------
        labels : array
            2-D or 3-D integers (0 or negative: not pore), taken as int32.
        edt : array
            The distance map, of the labels' shape, real (taken as float32).
        spacing : float or sequence of one value per axis, optional

        Returns
        -------
        dict
            ``{"porosity", "regions": [dict...], "throats": [dict...]}``.
            In 2-D the measures are the image's own: a region's "volume" is
            its area (pixels x sy x sx), "equivalent_radius" the radius of the
            disk of that area, "centroid" is (y, x); a throat's "faces" are
            the pixel edges its regions share and its "area" their length
            (each edge's length is the spacing along it).

        Examples
        --------
        >>> import accel, numpy as np
        >>> lab = np.zeros((3, 3, 4), np.int32); lab[:, :, :2] = 1; lab[:, :, 2:] = 2
        >>> with accel.Context() as ctx:
        ...     net = ctx.ct.network(lab, np.ones(lab.shape, np.float32))
        >>> len(net["regions"]), net["throats"][0]["faces"]
        (2, 9)
        >>> with accel.Context() as ctx:  # a 2-D image: 3 shared edges
        ...     ctx.ct.network(lab[0], np.ones(lab[0].shape, np.float32))["throats"][0]["faces"]
        3
        """
        import math
        lab = integer_as(self._in(labels, "labels", (2, 3))[0], "int32", "labels")
        e = real_as_f32(self._in(edt, "edt", (lab.ndim,))[0], "edt")
        h = ctypes.c_void_p()
        self._call(lib.accel_ct_network_build, ref(self._as3d(lab)), ref(self._as3d(e)),
                   _c_spacing(_sampling(spacing, lab.ndim, "spacing")), ctypes.byref(h))
        net = _network_dict(h)
        if lab.ndim == 2:  # the one-plane volume's measures are the image's, but for the disk and the centroid
            for r in net["regions"]:
                r["equivalent_radius"] = math.sqrt(r["volume"] / math.pi)
                r["centroid"] = tuple(r["centroid"][1:])
        return net

    def _pipeline_2d(self, image, threshold, compare, pores, spacing, min_distance, smooth_sigma, ties,
                     fill_connectivity, slope, intercept, markers, outputs, trim, saddle_iterations,
                     nearby_factor) -> Dict[str, Any]:
        """The pipeline of a 2-D image, stage by stage with 2-D rules."""
        import numpy as np
        outputs = (outputs,) if isinstance(outputs, str) else tuple(outputs)
        unknown = set(outputs) - {"solid", "filled", "pores", "edt", "markers", "labels", "network"}
        if unknown:
            raise ValueError("unknown outputs %s" % sorted(unknown))
        if smooth_sigma > 0:
            raise NotImplementedError("smoothing of a 2-D image is not implemented (3-D volumes only)")
        conn = {6: 1, 1: 1, 18: 2, 26: 2, 2: 2, 3: 2}.get(fill_connectivity)
        if conn is None:
            raise ValueError("fill_connectivity must be 6, 18 or 26 (1, 2 or 3), not %r" % (fill_connectivity,))
        sp = _sampling(spacing, 3, "spacing") if np.ndim(spacing) and len(spacing) == 3 else \
            _sampling(spacing, 2, "spacing")
        sp = (1.0, 1.0) if sp is None else tuple(sp)[-2:]
        img, back = self._in(image, "volume", (2,))
        if slope is not None or intercept is not None:
            img = self.rescale(img, 1.0 if slope is None else slope, 0.0 if intercept is None else intercept)
        r: Dict[str, Any] = {}
        closed = choice("pores", PORES, pores) == PORES["closed"]
        solid = self.threshold(img, threshold, compare)
        filled = self.fill_holes(solid, connectivity=conn) if closed or "filled" in outputs else None
        pore = filled & ~solid if closed else ~solid
        edt = self.edt(pore, sampling=sp)
        if markers is not None:
            mk = integer_as(self._in(markers, "markers", (2,))[0], "int32", "markers")
            count = int(np.count_nonzero(mk))
        else:
            mk, count = self.markers(edt, pore, min_distance=min_distance, trim=trim,
                                     saddle_iterations=saddle_iterations, nearby_factor=nearby_factor, spacing=sp)
        wants_labels = "labels" in outputs or "network" in outputs
        labels = self.watershed(-edt, mk, mask=pore, ties=ties) if wants_labels else None
        if "network" in outputs:
            r["network"] = self.network(labels, edt, spacing=sp)
        for name, value in (("solid", solid), ("filled", filled), ("pores", pore), ("edt", edt), ("markers", mk),
                            ("labels", labels)):
            if name in outputs:
                r[name] = back(value)
        r["marker_count"] = count
        return r

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
        o.compare = choice("compare", COMPARES, compare)
        o.fill_connectivity = _fill_connectivity(fill_connectivity, None, 3)
        o.pores = choice("pores", PORES, pores)
        sp = _sampling(spacing, 3, "spacing") or (1.0, 1.0, 1.0)
        for i in range(3):
            o.spacing[i] = sp[i]
        o.min_distance = min_distance
        o.smooth_sigma = smooth_sigma
        o.ties = choice("ties", TIES, ties)
        o.trim = self._trim_flags(trim)
        o.saddle_iterations = saddle_iterations
        o.nearby_factor = nearby_factor
        return o, keep

    @staticmethod
    def _outputs(shape, outputs, like=None):
        """The accel_ct_outputs for the requested outputs, the arrays they
        fill (by name: numpy, or device arrays of `like`'s kind), what must
        stay alive, and the network handle's holder."""
        import numpy as np
        out = CtOutputs.defaults()
        result, descs = {}, []
        for name in outputs:
            if name == "network":
                continue
            choice("output", _OUTPUT_DTYPES, name)
            if like is not None:
                view = device_empty(like, shape, _OUTPUT_DTYPES[name])
                result[name], d = view.obj, view.array
                descs.append(view)
            else:
                result[name] = np.empty(shape, _OUTPUT_DTYPES[name])
                d = as_array(result[name], True)
            descs.append(d)
            setattr(out, name, ctypes.cast(ctypes.pointer(d), ctypes.c_void_p))
        net = ctypes.c_void_p()
        if "network" in outputs:
            out.network = ctypes.pointer(net)
        return out, result, descs, net

    def pipeline(self, volume: Any, threshold: float, compare: str = ">", pores: str = "closed",
                 spacing: Spacing = (1.0, 1.0, 1.0), min_distance: int = 3, smooth_sigma: float = 0.0,
                 ties: str = "skimage", fill_connectivity: int = 6, slope: Any = None, intercept: Any = None,
                 markers: Any = None, outputs: Union[str, Sequence[str]] = ("filled", "pores", "edt", "markers",
                                                                            "labels", "network"),
                 progress: ProgressArg = None, trim: Union[str, Sequence[str]] = (), saddle_iterations: int = 20,
                 nearby_factor: float = 1.0) -> Dict[str, Any]:
        """The whole chain in one call (one upload and one download per output on a GPU).

        Parameters
        ----------
        volume : array
            3-D, or a 2-D image (the same stages with the image's own 2-D
            neighbourhoods, see Notes); a dtype :meth:`threshold` takes.
        threshold : float
        compare : {">", ">=", "<", "<="}
        pores : {"closed", "all"}
            Pores are the filled holes only, or all background.
        spacing : float or sequence of 3 floats
        min_distance, smooth_sigma, trim, saddle_iterations, nearby_factor
            As for :meth:`markers`.
        ties : {"skimage", "stable"}
            As for :meth:`watershed`.
        fill_connectivity : int
            As for :meth:`fill_holes` (1 or 6, 3 or 26).
        slope, intercept : optional
            DICOM's rescale first, as :meth:`rescale`.
        markers : array, optional
            int32 markers to use instead of finding them.
        outputs : str or sequence of str
            Among solid, filled, pores, edt, markers, labels, network.
        progress : None, True or callable(stage, fraction)

        Returns
        -------
        dict
            The requested outputs (the network as :meth:`network` gives it)
            and "marker_count".

        Notes
        -----
        A 2-D image runs the stages one by one with their 2-D rules: fill
        holes with the 2-D neighbourhood of `fill_connectivity` (6: 4
        neighbours, 18 or 26: 8), the 2-D EDT with the last two spacings,
        the peak search's 2-D rules (and the trims' PoreSpy 2-D rules), the
        watershed 4-connected, the network of :meth:`network`'s 2-D
        measures. Smoothing is 3-D only (NotImplementedError).

        Examples
        --------
        >>> import accel, numpy as np
        >>> vol = np.full((9, 9, 9), 200, np.uint8); vol[2:7, 2:7, 2:7] = 0
        >>> with accel.Context() as ctx:
        ...     r = ctx.ct.pipeline(vol, 100, outputs=("labels", "network"))
        >>> r["marker_count"], len(r["network"]["regions"])
        (1, 1)
        """
        if getattr(volume, "ndim", 3) == 2 and device_in(self._ctx, volume, _VOLUME_DTYPES) is None:
            return self._pipeline_2d(volume, threshold, compare, pores, spacing, min_distance, smooth_sigma, ties,
                                     fill_connectivity, slope, intercept, markers, outputs, trim, saddle_iterations,
                                     nearby_factor)
        dv = device_in(self._ctx, volume, _VOLUME_DTYPES)  # a GPU array in place, the results on its device
        v = dv if dv is not None else _volume_dtype(self._in(volume, "volume")[0], "volume")
        outputs = (outputs,) if isinstance(outputs, str) else tuple(outputs)
        o, keep = self._pipeline_options(v, threshold, compare, pores, spacing, min_distance, smooth_sigma, ties,
                                         fill_connectivity, slope, intercept, trim, saddle_iterations, nearby_factor)
        p = ctypes.c_void_p()
        with Call(progress) as c:
            o.progress = c.fn
            self._call(lib.accel_ct_pipeline_create, ctypes.byref(o), ctypes.byref(p))
            try:
                out, result, descs, net = self._outputs(v.shape, outputs, None if dv is None else volume)
                dm = None if markers is None or dv is None else device_in(self._ctx, markers, ("int32",))
                mk = None if markers is None or dm is not None else \
                    integer_as(self._in(markers, "markers")[0], "int32", "markers")
                check(lib.accel_ct_pipeline_run(p, ref(v) if dv is None else dv.ref(),
                                                ref(mk) if dm is None else dm.ref(), ctypes.byref(out)), self._h())
                if "network" in outputs:
                    result["network"] = _network_dict(net)
                result["marker_count"] = out.marker_count
                return result
            finally:
                lib.accel_ct_pipeline_destroy(p)
