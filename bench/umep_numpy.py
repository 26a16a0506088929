"""Plain-numpy re-implementation of UMEP's sky view factor and shadow casting.

What this transcribes
---------------------
UMEP (Urban Multi-scale Environmental Predictor), repository
UMEP-dev/UMEP-processing, licensed GPLv3.  The algorithms follow, step for
step, these upstream numpy functions:

* ``util/shadowingfunctions.py`` (numpy version, commit 6301c7d0, before the
  file was ported to torch/grid_sample):
  ``shadowingfunctionglobalradiation`` and ``shadowingfunction_20`` (the
  August-2021 variant with the "pergola" rule: ``dzprev``,
  ``lastfabovea``, ``lastgabovea``, loop index starting at 0).
* ``functions/svf_functions.py`` (commit 24ebed0a): ``annulus_weight`` and
  ``svfForProcessing153`` (vegetation heights made absolute, the bush grid,
  ``amaxvalue``, float64 accumulators, the E/S/W/N half-sky rules and the
  final 3.0459e-4 / clamp-at-1 corrections).
* ``util/SEBESOLWEIGCommonFiles/create_patches.py`` (commits dc385754 /
  7fba43cb, identical tables): the sky-patch schemes 1..4 (145, 153,
  "306" and "612" patches; the last two actually give 305 and 609 patches).

The code below is an independent re-write (own structure, names and
comments) of those algorithms, not a copy of the upstream text.  It keeps
upstream's arithmetic order and float64 precision, because the frozen
references in ``shared/data/svf`` are bit-exact UMEP outputs:

* shadows (``shadow_az*_alt*_{sh,vegsh,vbshvegsh}.npy``):
  ``shadowingfunction_20`` called with *absolute* vegetation heights
  (``cdsm + dsm``, 0 where ``cdsm == 0``; same for ``tdsm``), the bush grid
  of ``svfForProcessing153`` (all zero here, because every tree has a trunk
  zone) and ``amaxvalue = max(dsm.max(), cdsm.max())``; scale = 1/pixel.
* SVF (``svf_*.npy``): ``svfForProcessing153`` with float64 accumulation,
  written out as float32 (UMEP saves GeoTIFF Float32).  Reproduced
  bit-for-bit after the float32 cast.

Run ``python3 bench/umep_numpy.py`` to check every folder under
``../shared/data/svf`` (or the folders given on the command line).
Only numpy is needed.
"""

import os
import sys
import time

import numpy as np

# Upstream works in float64 everywhere (GDAL rasters are read with
# ``.astype(float)``).
_F64 = np.float64

# The constant UMEP adds to svfS/svfW (and to their vegetation variants where
# there is no trunk zone).  It is sin(1 deg)**2, the weight of the single
# zenith annulus of the old 655-direction scheme, kept in the 153 scheme.
LAST_ANNULUS = 3.0459e-004

GRID_NAMES = ("svf", "svfE", "svfS", "svfW", "svfN",
              "svfveg", "svfEveg", "svfSveg", "svfWveg", "svfNveg",
              "svfaveg", "svfEaveg", "svfSaveg", "svfWaveg", "svfNaveg")


# --------------------------------------------------------------------------
# Ray-marching helpers shared by both shadow functions
# --------------------------------------------------------------------------

class _SunStepper:
    """Pixel offsets (dx, dy) and height drop dz of step ``index`` towards the
    sun, exactly as UMEP derives them.

    dx runs along rows (axis 0, positive = towards larger row numbers, i.e.
    south on a north-up raster), dy along columns (axis 1, east).  The
    azimuth is measured clockwise from north.
    """

    def __init__(self, azimuth_deg, altitude_deg, scale):
        to_rad = np.pi / 180.
        az = azimuth_deg * to_rad
        alt = altitude_deg * to_rad
        self.az = az
        sin_az = np.sin(az)
        cos_az = np.cos(az)
        self.tan_az = np.tan(az)
        self.sgn_sin = np.sign(sin_az)
        self.sgn_cos = np.sign(cos_az)
        with np.errstate(divide="ignore"):
            # 1/sin(0) is inf upstream as well; it is never used then.
            self.ds_sin = np.abs(1. / sin_az)
            self.ds_cos = np.abs(1. / cos_az)
        self.tan_alt_by_scale = np.tan(alt) / scale
        quarter = np.pi / 4.
        # "A and B or C and D" in upstream: (A and B) or (C and D).
        self.steps_along_columns = ((quarter <= az and az < 3. * quarter) or
                                    (5. * quarter <= az and az < 7. * quarter))

    def step(self, index):
        if self.steps_along_columns:
            dy = self.sgn_sin * index
            dx = -1. * self.sgn_cos * np.abs(np.round(index / self.tan_az))
            ds = self.ds_sin
        else:
            dy = self.sgn_sin * np.abs(np.round(index * self.tan_az))
            dx = -1. * self.sgn_cos * index
            ds = self.ds_cos
        dz = (ds * index) * self.tan_alt_by_scale
        return dx, dy, dz


def _windows(dx, dy, rows, cols):
    """Destination and source slices of a grid shifted by (dx, dy):
    dest[x, y] = src[x + dx, y + dy] where that lies inside the grid.
    (UMEP's xp1:xp2 / xc1:xc2 with int() truncation; dx, dy are integral.)"""
    adx = abs(dx)
    ady = abs(dy)
    src_r = slice(int((dx + adx) / 2.), int(rows + (dx - adx) / 2.))
    src_c = slice(int((dy + ady) / 2.), int(cols + (dy - ady) / 2.))
    dst_r = slice(int(-((dx - adx) / 2.)), int(rows - (dx + adx) / 2.))
    dst_c = slice(int(-((dy - ady) / 2.)), int(cols - (dy + ady) / 2.))
    return (dst_r, dst_c), (src_r, src_c)


def _shifted_minus(grid, drop, dst, src, out):
    """out = grid shifted towards the sun minus ``drop`` inside the overlap,
    and 0.0 (not -drop) outside it, as upstream zero-fills its temporaries."""
    out.fill(0.)
    out[dst] = grid[src] - drop
    return out


# --------------------------------------------------------------------------
# UMEP-named functions
# --------------------------------------------------------------------------

def shadowingfunctionglobalradiation(a, azimuth, altitude, scale, forsvf=1):
    """Building/ground shadows only.  Returns float64, 1 = sunlit.

    ``forsvf`` only drove a progress bar upstream; it is accepted and ignored.
    Upstream starts this loop at index 1 and stops on ``a.max()``.
    """
    a = np.asarray(a, dtype=_F64)
    rows, cols = a.shape
    sun = _SunStepper(azimuth, altitude, scale)
    top = a.max()
    envelope = a
    shifted = np.zeros((rows, cols), dtype=_F64)
    dx = dy = dz = 0.
    index = 1.
    while top >= dz and np.abs(dx) < rows and np.abs(dy) < cols:
        dx, dy, dz = sun.step(index)
        dst, src = _windows(dx, dy, rows, cols)
        _shifted_minus(a, dz, dst, src, shifted)
        envelope = np.fmax(envelope, shifted)
        index += 1.
    # upstream: sh = double(logical_not(f - a)), i.e. sunlit where f == a
    return np.logical_not(envelope - a).astype(_F64)


def shadowingfunction_20(a, vegdem, vegdem2, azimuth, altitude, scale,
                         amaxvalue, bush, forsvf=1):
    """Building and vegetation shadows, UMEP 2021 version with the pergola rule.

    a        ground+building DSM
    vegdem   canopy top, absolute height (0 where no vegetation)
    vegdem2  trunk-zone top, absolute height (0 where no vegetation)
    bush     canopy pixels without a trunk zone (see ``vegetation_inputs``)
    Returns a dict of float64 grids: sh (1 = sunlit w.r.t. buildings),
    vegsh (1 = not shaded by vegetation) and vbshvegsh (0 where a vegetation
    shadow lies inside a building shadow).
    """
    a = np.asarray(a, dtype=_F64)
    vegdem = np.asarray(vegdem, dtype=_F64)
    vegdem2 = np.asarray(vegdem2, dtype=_F64)
    rows, cols = a.shape
    sun = _SunStepper(azimuth, altitude, scale)

    canopy_now = np.zeros((rows, cols), dtype=_F64)
    trunk_now = np.zeros((rows, cols), dtype=_F64)
    ground_now = np.zeros((rows, cols), dtype=_F64)
    canopy_prev = np.zeros((rows, cols), dtype=_F64)
    trunk_prev = np.zeros((rows, cols), dtype=_F64)

    # All state below only ever holds 0/1, so booleans are exact stand-ins
    # for upstream's float64 0./1. grids.
    veg_shade = np.asarray(bush) > 1.          # bushes shade themselves
    ever_veg_shade = np.zeros((rows, cols), dtype=bool)
    bld_shade = np.zeros((rows, cols), dtype=bool)
    envelope = a

    dx = dy = dz = 0.
    dz_prev = 0.
    index = 0.            # upstream changed the start from 1 to 0 in 2021
    while amaxvalue >= dz and np.abs(dx) < rows and np.abs(dy) < cols:
        dx, dy, dz = sun.step(index)
        dst, src = _windows(dx, dy, rows, cols)
        _shifted_minus(vegdem, dz, dst, src, canopy_now)
        _shifted_minus(vegdem2, dz, dst, src, trunk_now)
        _shifted_minus(a, dz, dst, src, ground_now)

        envelope = np.fmax(envelope, ground_now)
        bld_shade = envelope > a

        # pergola rule: the canopy/trunk rays of this step and of the
        # previous step (dz of the previous step, same shift)
        _shifted_minus(vegdem, dz_prev, dst, src, canopy_prev)
        _shifted_minus(vegdem2, dz_prev, dst, src, trunk_prev)
        dz_prev = dz
        hits = ((canopy_now > a).astype(np.int8) + (trunk_now > a) +
                (canopy_prev > a) + (trunk_prev > a))
        # shaded when 1..3 of the four tests hold; all four = seen through
        step_shade = (hits > 0) & (hits < 4)

        veg_shade = (veg_shade | step_shade) & ~bld_shade
        ever_veg_shade |= veg_shade
        index += 1.

    sh = 1. - bld_shade
    vbshvegsh = 1. - (ever_veg_shade.astype(_F64) - veg_shade)
    vegsh = 1. - veg_shade
    return {"sh": sh, "vegsh": vegsh, "vbshvegsh": vbshvegsh}


def annulus_weight(altitude, aziinterval):
    """Weight of one 1-degree annulus (``altitude`` = annulus number 1..90,
    1 at the horizon) divided among ``aziinterval`` patches.  Same operation
    order as upstream; the full-sky sum over altitude 1..90 is 1."""
    n = 90.
    step_rad = (360. / aziinterval) * (np.pi / 180.)
    ring = 91. - altitude
    w = (1. / (2. * np.pi)) * np.sin(np.pi / (2. * n)) * \
        np.sin((np.pi * (2. * ring - 1.)) / (2. * n))
    return step_rad * w


def create_patches(patch_option):
    """UMEP's sky-vault tables.  Returns (skyvaultalt, skyvaultazi, annulino,
    skyvaultaltint, patches_in_band, skyvaultaziint, azistart).

    1: 145 patches (Robinson & Stone 2004), 2: 153 (Wallenberg et al. 2022),
    3: "306" (really 305), 4: "612" (really 609; note the half-degree
    annulus limit 4.5)."""
    if patch_option in (1, 2, 3):
        annulino = np.array([0, 12, 24, 36, 48, 60, 72, 84, 90])
        alt_band = np.array([6, 18, 30, 42, 54, 66, 78, 90])
        azistart = np.array([0, 4, 2, 5, 8, 0, 10, 0])
        counts = {1: [30, 30, 24, 24, 18, 12, 6, 1],
                  2: [31, 30, 28, 24, 19, 13, 7, 1],
                  3: [62, 60, 56, 48, 38, 26, 14, 1]}[patch_option]
        per_band = np.array(counts)
    elif patch_option == 4:
        annulino = np.array([0, 4.5, 9, 15, 21, 27, 33, 39, 45, 51, 57, 63,
                             69, 75, 81, 90])
        alt_band = np.array([3, 9, 15, 21, 27, 33, 39, 45, 51, 57, 63, 69,
                             75, 81, 90])
        per_band = np.array([62, 62, 60, 60, 56, 56, 48, 48, 38, 38, 26, 26,
                             14, 14, 1])
        azistart = np.array([0, 0, 4, 4, 2, 2, 5, 5, 8, 8, 0, 0, 10, 10, 0])
    else:
        raise ValueError("patch_option must be 1, 2, 3 or 4")
    azi_step = np.array([360 / p for p in per_band])
    alts, azis = [], []
    for band in range(alt_band.shape[0]):
        for k in range(per_band[band]):
            alts.append(alt_band[band])
            azis.append(k * azi_step[band] + azistart[band])
    return (np.array(alts, dtype=_F64), np.array(azis, dtype=_F64), annulino,
            alt_band, per_band, azi_step, azistart)


PATCH_OPTIONS = {145: 1, 153: 2, 306: 3, 305: 3, 612: 4, 609: 4}


def patch_azimuths(patch_option):
    """Azimuth of every patch in the order the SVF loop visits them
    (band by band from the horizon, azimuth ascending; >360 wraps)."""
    _, _, _, alt_band, per_band, _, azistart = create_patches(patch_option)
    out = np.zeros(int(np.sum(per_band)))
    i = 0
    for band in range(alt_band.shape[0]):
        step = 360 / per_band[band]          # recomputed like upstream
        for k in range(int(360 / step)):
            az = k * step + azistart[band]
            if az > 360.:
                az = az - 360.
            out[i] = az
            i += 1
    return out


def vegetation_inputs(dsm, vegdem, vegdem2):
    """svfForProcessing153's preparation of the vegetation grids.

    vegdem/vegdem2 come in as heights above ground (CDSM/TDSM).  Returns
    (amaxvalue, canopy_abs, trunk_abs, bush): amaxvalue from the raw grids,
    absolute heights with 0 wherever the sum equals the DSM, and the bush
    grid (canopy height where the canopy*trunk product is zero)."""
    dsm = np.asarray(dsm, dtype=_F64)
    vegdem = np.asarray(vegdem, dtype=_F64)
    amaxvalue = np.maximum(dsm.max(), vegdem.max())
    canopy = vegdem + dsm
    canopy[canopy == dsm] = 0
    trunk = np.asarray(vegdem2, dtype=_F64) + dsm
    trunk[trunk == dsm] = 0
    bush = np.logical_not(trunk * canopy) * canopy
    return amaxvalue, canopy, trunk, bush


def svfForProcessing153(dsm, vegdem, vegdem2, scale, usevegdem,
                        patch_option=2, keep_matrices=True):
    """UMEP's SVF over sky patches (upstream hard-codes patch_option 2 = 153).

    dsm in metres, vegdem/vegdem2 = canopy/trunk heights above ground
    (ignored when usevegdem == 0).  Returns a dict with the 15 float64 grids
    and, if keep_matrices, 'shmat', 'vegshmat', 'vbshvegshmat' of shape
    (rows, cols, patches) float64 (veg matrices stay 0 when usevegdem == 0,
    as upstream)."""
    dsm = np.asarray(dsm, dtype=_F64)
    rows, cols = dsm.shape
    acc = {name: np.zeros((rows, cols), dtype=_F64) for name in GRID_NAMES}

    if usevegdem == 1:
        amaxvalue, canopy, trunk, bush = vegetation_inputs(dsm, vegdem, vegdem2)

    _, _, annulino, alt_band, per_band, _, _ = create_patches(patch_option)
    azimuths = patch_azimuths(patch_option)
    n_patch = int(np.sum(per_band))
    half_band = np.ceil(per_band / 2.0)

    mats = None
    if keep_matrices:
        mats = {k: np.zeros((rows, cols, n_patch), dtype=_F64)
                for k in ("shmat", "vegshmat", "vbshvegshmat")}

    index = 0
    for band in range(alt_band.shape[0]):
        # annulus numbers covered by this band; float arange like upstream
        # (patch option 4 yields 5.5, 6.5, ... for its second band)
        rings = np.arange(annulino[band] + 1, annulino[band + 1] + 1)
        for _ in range(per_band[band]):
            altitude = alt_band[band]
            azimuth = azimuths[index]
            if usevegdem == 1:
                res = shadowingfunction_20(dsm, canopy, trunk, azimuth,
                                           altitude, scale, amaxvalue, bush, 1)
                sh, vegsh, vbsh = res["sh"], res["vegsh"], res["vbshvegsh"]
            else:
                sh = shadowingfunctionglobalradiation(dsm, azimuth, altitude,
                                                      scale, 1)
            if mats is not None:
                mats["shmat"][:, :, index] = sh
                if usevegdem == 1:
                    mats["vegshmat"][:, :, index] = vegsh
                    mats["vbshvegshmat"][:, :, index] = vbsh

            east = 0 <= azimuth < 180
            south = 90 <= azimuth < 270
            west = 180 <= azimuth < 360
            north = azimuth >= 270 or azimuth < 90
            sides = [(s, flag) for s, flag in
                     (("E", east), ("S", south), ("W", west), ("N", north))
                     if flag]

            # building SVF: whole sky with per_band, half skies with
            # ceil(per_band/2) patches per annulus
            for ring in rings:
                acc["svf"] = acc["svf"] + annulus_weight(ring, per_band[band]) * sh
                part = annulus_weight(ring, half_band[band]) * sh
                for s, _flag in sides:
                    acc["svf" + s] = acc["svf" + s] + part
            if usevegdem == 1:
                for ring in rings:
                    w = annulus_weight(ring, per_band[band])
                    acc["svfveg"] = acc["svfveg"] + w * vegsh
                    acc["svfaveg"] = acc["svfaveg"] + w * vbsh
                    w = annulus_weight(ring, half_band[band])
                    for s, _flag in sides:
                        acc["svf" + s + "veg"] = acc["svf" + s + "veg"] + w * vegsh
                        acc["svf" + s + "aveg"] = acc["svf" + s + "aveg"] + w * vbsh
            index += 1

    # legacy zenith correction for the south and west half skies, then clamp
    acc["svfS"] = acc["svfS"] + LAST_ANNULUS
    acc["svfW"] = acc["svfW"] + LAST_ANNULUS
    for name in GRID_NAMES[:5]:
        acc[name][acc[name] > 1.] = 1.
    if usevegdem == 1:
        last = np.zeros((rows, cols))
        last[trunk == 0.] = LAST_ANNULUS
        for name in ("svfSveg", "svfWveg", "svfSaveg", "svfWaveg"):
            acc[name] = acc[name] + last
        for name in GRID_NAMES[5:]:
            acc[name][acc[name] > 1.] = 1.

    if mats is not None:
        acc.update(mats)
    return acc


# --------------------------------------------------------------------------
# Convenience API in the conventions of shared/data/svf
# --------------------------------------------------------------------------

def shadows(dsm, cdsm, tdsm, azimuth, altitude, pixel_size, amaxvalue=None):
    """The three shadow grids of ``shadowingfunction_20`` for one sun position,
    prepared the way UMEP's SVF code prepares its inputs (cdsm/tdsm are
    heights above ground).  float32 grids, 1 = sunlit / not shaded.

    amaxvalue defaults to the SVF rule max(dsm.max(), cdsm.max()); UMEP's
    shadow generator and SOLWEIG use max(dsm.max() - dsm.min(), cdsm.max())
    instead.  Both reproduce the shared references (any value at least the
    height range that matters gives the same grids)."""
    svf_amax, canopy, trunk, bush = vegetation_inputs(dsm, cdsm, tdsm)
    if amaxvalue is None:
        amaxvalue = svf_amax
    res = shadowingfunction_20(dsm, canopy, trunk, azimuth, altitude,
                               1. / pixel_size, amaxvalue, bush, 1)
    return {k: v.astype(np.float32) for k, v in res.items()}


def svf(dsm, cdsm, tdsm, pixel_size, patches=153, return_matrices=False):
    """The 15 SVF grids as float32 (UMEP writes Float32 GeoTIFFs).

    cdsm/tdsm: heights above ground; cdsm=None runs the building-only path
    (vegetation grids then stay 0, as upstream).  patches: 145, 153,
    306 (305) or 612 (609).  With return_matrices the float64 per-patch
    matrices 'shmat', 'vegshmat', 'vbshvegshmat' (rows, cols, patches) are
    included too."""
    use_veg = 0 if cdsm is None else 1
    if tdsm is None and cdsm is not None:
        tdsm = np.asarray(cdsm, dtype=_F64) * 0.25     # UMEP default 25 %
    res = svfForProcessing153(dsm, cdsm, tdsm, 1. / pixel_size, use_veg,
                              patch_option=PATCH_OPTIONS[patches],
                              keep_matrices=return_matrices)
    out = {name: res[name].astype(np.float32) for name in GRID_NAMES}
    if return_matrices:
        for k in ("shmat", "vegshmat", "vbshvegshmat"):
            out[k] = res[k]
    return out


# --------------------------------------------------------------------------
# Check against the frozen references
# --------------------------------------------------------------------------

def _read_meta(folder):
    meta = {}
    path = os.path.join(folder, "meta.txt")
    if os.path.exists(path):
        with open(path) as fh:
            for line in fh:
                parts = line.split(None, 1)
                if len(parts) == 2:
                    meta[parts[0]] = parts[1].strip()
    return meta


def _sun_positions(folder):
    found = set()
    for name in os.listdir(folder):
        if name.startswith("shadow_az") and name.endswith("_sh.npy"):
            az, alt = name[len("shadow_az"):-len("_sh.npy")].split("_alt")
            found.add((az, alt))
    return sorted(found, key=lambda p: (float(p[0]), float(p[1])))


def check_folder(folder):
    """Compare this module with one reference folder; returns True if every
    shadow grid is identical and every SVF grid equal within 1e-6."""
    meta = _read_meta(folder)
    dsm = np.load(os.path.join(folder, "dsm.npy"))
    cdsm = np.load(os.path.join(folder, "cdsm.npy"))
    tdsm = np.load(os.path.join(folder, "tdsm.npy"))
    pixel = float(meta.get("pixel_size_m", "1"))
    ok = True
    print("%s  shape %s  pixel %g m" % (os.path.basename(folder), dsm.shape, pixel))

    for az, alt in _sun_positions(folder):
        t0 = time.perf_counter()
        got = shadows(dsm, cdsm, tdsm, float(az), float(alt), pixel)
        dt = time.perf_counter() - t0
        parts = []
        for key in ("sh", "vegsh", "vbshvegsh"):
            ref = np.load(os.path.join(folder, "shadow_az%s_alt%s_%s.npy" % (az, alt, key)))
            n_diff = int(np.count_nonzero(got[key] != ref))
            ok &= n_diff == 0
            parts.append("%s %d px differ" % (key, n_diff))
        print("  shadow az %-5s alt %-3s  %s  (%.3f s)" % (az, alt, ", ".join(parts), dt))

    t0 = time.perf_counter()
    grids = svf(dsm, cdsm, tdsm, pixel)
    dt = time.perf_counter() - t0
    worst = 0.
    line = []
    for name in GRID_NAMES:
        ref = np.load(os.path.join(folder, "svf_%s.npy" % name))
        d = float(np.abs(grids[name].astype(_F64) - ref.astype(_F64)).max())
        worst = max(worst, d)
        line.append("%s %.1e" % (name, d))
    ok &= worst <= 1e-6
    # the building-only path (shadowingfunctionglobalradiation) must give
    # the same five building grids
    t1 = time.perf_counter()
    bare = svf(dsm, None, None, pixel)
    dt_bare = time.perf_counter() - t1
    d_bare = max(float(np.abs(bare[n].astype(_F64) - grids[n]).max())
                 for n in GRID_NAMES[:5])
    ok &= d_bare == 0.
    ref_time = meta.get("umep_numpy_seconds", "?")
    print("  svf 153 patches: %.2f s (UMEP numpy: %s s); max |diff| %.3g" % (dt, ref_time, worst))
    for i in range(0, len(line), 5):
        print("    " + "  ".join(line[i:i + 5]))
    print("  building-only path (usevegdem=0): %.2f s, max |diff| to the "
          "vegetation run's svf/E/S/W/N %.3g" % (dt_bare, d_bare))
    return ok


def _default_folders():
    here = os.path.dirname(os.path.abspath(__file__))
    base = os.path.join(here, "..", "..", "shared", "data", "svf")
    if not os.path.isdir(base):
        return []
    return [os.path.join(base, d) for d in sorted(os.listdir(base))
            if os.path.exists(os.path.join(base, d, "dsm.npy"))]


def main(argv):
    folders = argv[1:] or _default_folders()
    if not folders:
        print("umep_numpy: no reference folders found (../shared/data/svf)",
              file=sys.stderr)
        return 2
    all_ok = True
    for folder in folders:
        all_ok &= check_folder(folder)
    print("ALL MATCH" if all_ok else "MISMATCH")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
