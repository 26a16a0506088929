"""Markers that the watershed derives itself, as scikit-image 0.19.3 does.

``markers=None``: the local minima of the image (plateaus of equal values,
connected by the watershed's connectivity, with no strictly lower neighbour;
found, as scikit-image finds them, as the maxima of the image inverted by
``skimage.util.invert``'s rule, so a plateau of the highest value never
counts), restricted to the mask and numbered by connected group in C order
(``scipy.ndimage.label`` with the same connectivity).

``markers=N`` (an integer): about N seeds on a regular grid
(``skimage.util.regular_seeds``), N scaled up by the share of the image
outside the mask, numbered in C order, then restricted to the mask.
"""

from typing import Any, Iterator, List, Optional, Tuple


def _offsets(ndim: int, connectivity: int) -> List[Tuple[int, ...]]:
    """The half of the neighbourhood that follows the centre in C order:
    offsets in {-1, 0, 1}^ndim with 1 to ``connectivity`` nonzero entries."""
    import itertools
    out = []
    for o in itertools.product((-1, 0, 1), repeat=ndim):
        nz = sum(1 for v in o if v)
        if 0 < nz <= connectivity and o > (0,) * ndim:
            out.append(o)
    return out


def _pairs(shape: Tuple[int, ...], connectivity: int) -> Iterator[Tuple[Any, Any]]:
    """(a, b): flat indices of every pair of neighbours, one array each per offset."""
    import numpy as np
    idx = np.arange(int(np.prod(shape))).reshape(shape)
    for o in _offsets(len(shape), connectivity):
        src = tuple(slice(None, -1) if v == 1 else slice(1, None) if v == -1 else slice(None) for v in o)
        dst = tuple(slice(1, None) if v == 1 else slice(None, -1) if v == -1 else slice(None) for v in o)
        yield idx[src].ravel(), idx[dst].ravel()


def _components(n: int, a: Any, b: Any) -> Any:
    """Per element of range(n), the smallest index of its group, the groups
    joined by the edges (a[k], b[k])."""
    import numpy as np
    root = np.arange(n)
    while True:
        m = np.minimum(root[a], root[b])
        before = root.copy()
        np.minimum.at(root, a, m)
        np.minimum.at(root, b, m)
        while True:  # pointer jumping: every element straight to its group's current root
            nxt = root[root]
            if np.array_equal(nxt, root):
                break
            root = nxt
        if np.array_equal(root, before):
            return root


def _label(on: Any, connectivity: int) -> Any:
    """scipy.ndimage.label(on, generate_binary_structure(on.ndim, connectivity))[0] as int32."""
    import numpy as np
    flat = on.ravel()
    a_all, b_all = [], []
    for a, b in _pairs(on.shape, connectivity):
        keep = flat[a] & flat[b]
        a_all.append(a[keep])
        b_all.append(b[keep])
    a = np.concatenate(a_all) if a_all else np.zeros(0, np.int64)
    b = np.concatenate(b_all) if b_all else np.zeros(0, np.int64)
    root = _components(flat.size, a, b)
    out = np.zeros(flat.size, np.int32)
    roots = np.unique(root[flat])  # the group's first element in C order: numbered in that order
    out[flat] = np.searchsorted(roots, root[flat]) + 1
    return out.reshape(on.shape)


def _inverted(image: Any) -> Any:
    """skimage.util.invert(image): the order its local maxima are found in."""
    import numpy as np
    if image.dtype == np.bool_:
        return ~image
    if image.dtype.kind == "u":
        return np.subtract(np.iinfo(image.dtype).max, image, dtype=image.dtype)
    if image.dtype.kind == "i":
        return np.subtract(-1, image, dtype=image.dtype)
    return np.subtract(1, image, dtype=image.dtype)


def local_minima_markers(image: Any, mask: Optional[Any], connectivity: int) -> Any:
    """The markers of ``watershed(image, None, connectivity, mask=mask)``."""
    import numpy as np
    inv = _inverted(np.asarray(image))
    flat = inv.ravel()
    n = flat.size
    higher = np.zeros(n, bool)  # has a strictly higher neighbour: not on a maximum
    ea, eb = [], []
    for a, b in _pairs(inv.shape, connectivity):
        va, vb = flat[a], flat[b]
        higher[a[vb > va]] = True
        higher[b[va > vb]] = True
        eq = va == vb
        ea.append(a[eq])
        eb.append(b[eq])
    root = _components(n, np.concatenate(ea) if ea else np.zeros(0, np.int64),
                       np.concatenate(eb) if eb else np.zeros(0, np.int64))
    bad = np.zeros(n, bool)
    bad[root[higher]] = True
    peak = ~bad[root]
    if n and np.all(flat == flat[0]):
        peak[:] = False  # one plateau touching the border at the padding's value
    peak = peak.reshape(inv.shape)
    if mask is not None:
        peak &= mask
    return _label(peak, connectivity)


def _regular_slices(shape: Tuple[int, ...], n_points: int) -> Tuple[slice, ...]:
    """skimage.util.regular_grid(shape, n_points)."""
    import numpy as np
    ar_shape = np.asarray(shape)
    ndim = len(shape)
    unsort = np.argsort(np.argsort(ar_shape))
    dims = np.sort(ar_shape)
    space = float(np.prod(ar_shape))
    if space <= n_points:
        return (slice(None),) * ndim
    steps = np.full(ndim, (space / n_points) ** (1.0 / ndim), dtype="float64")
    if (dims < steps).any():
        for dim in range(ndim):
            steps[dim] = dims[dim]
            space = float(np.prod(dims[dim + 1:]))
            steps[dim + 1:] = (space / n_points) ** (1.0 / (ndim - dim - 1))
            if (dims >= steps).all():
                break
    starts = (steps // 2).astype(int)
    steps = np.round(steps).astype(int)
    slices = [slice(s, None, t) for s, t in zip(starts, steps)]
    return tuple(slices[i] for i in unsort)


def grid_markers(shape: Tuple[int, ...], count: int, mask: Optional[Any]) -> Any:
    """The markers of ``watershed(image, count, mask=mask)``."""
    import numpy as np
    size = int(np.prod(shape))
    inside = size if mask is None else int(np.count_nonzero(mask))
    if count < 1:
        raise ValueError("markers given as a count must be >= 1, not %d" % count)
    if inside == 0:
        raise ValueError("markers given as a count need a mask with at least one voxel set")
    n_points = int(count / (inside / size))
    seeds = np.zeros(shape, np.int32)
    grid = _regular_slices(tuple(shape), n_points)
    seeds[grid] = 1 + np.arange(seeds[grid].size).reshape(seeds[grid].shape)
    if mask is not None:
        seeds *= mask
    return seeds
