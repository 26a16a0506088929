//! Shadows and sky view factors as UMEP's SOLWEIG computes them (`accel/svf.h`).
//! Grids are `f32` slices in row order with a shape `[rows, cols]`.
use crate::array::{output, view};
use crate::context::Context;
use crate::error::{check, Error, Result};
use libaccel_sys as sys;
use std::ffi::CStr;

/// The 15 SVF grids' names in UMEP's order (`svf`, `svfE`, ..., `svfNaveg`).
pub const GRID_NAMES: [&str; 15] = [
    "svf", "svfE", "svfS", "svfW", "svfN", "svfveg", "svfEveg", "svfSveg", "svfWveg", "svfNveg", "svfaveg", "svfEaveg",
    "svfSaveg", "svfWaveg", "svfNaveg",
];

/// The per-patch visibility matrices' names (UMEP's `shmat`, `vegshmat`, `vbshvegshmat`).
pub const MATRIX_NAMES: [&str; 3] = ["shmat", "vegshmat", "vbshvegshmat"];

/// A surface model: the DSM (ground and buildings, metres), optionally the
/// vegetation canopy height above ground (CDSM) and the trunk-zone height
/// (TDSM; without one, `trunk_ratio` x CDSM), all of one shape.
#[derive(Clone, Copy, Debug)]
pub struct Surface<'a> {
    /// Ground plus buildings.
    pub dsm: &'a [f32],
    /// Vegetation canopy above ground.
    pub cdsm: Option<&'a [f32]>,
    /// Trunk zone above ground (needs a CDSM).
    pub tdsm: Option<&'a [f32]>,
    /// `[rows, cols]`, row 0 north on a north-up raster.
    pub shape: [usize; 2],
}

impl<'a> Surface<'a> {
    /// A DSM without vegetation.
    pub fn new(dsm: &'a [f32], shape: [usize; 2]) -> Self {
        Surface { dsm, cdsm: None, tdsm: None, shape }
    }

    /// The same with a canopy (and an optional trunk zone).
    pub fn with_vegetation(self, cdsm: &'a [f32], tdsm: Option<&'a [f32]>) -> Self {
        Surface { cdsm: Some(cdsm), tdsm, ..self }
    }

    fn views(&self) -> Result<[Option<sys::accel_array>; 3]> {
        let s = &self.shape;
        Ok([
            Some(view(self.dsm, s, "dsm")?),
            self.cdsm.map(|c| view(c, s, "cdsm")).transpose()?,
            self.tdsm.map(|t| view(t, s, "tdsm")).transpose()?,
        ])
    }
}

fn ptr(a: &Option<sys::accel_array>) -> *const sys::accel_array {
    a.as_ref().map_or(std::ptr::null(), |a| a as *const sys::accel_array)
}

/// The rays' settings (`accel_svf_options`).
#[derive(Clone, Debug, PartialEq)]
pub struct SvfOptions {
    /// Metres per pixel (> 0); required.
    pub pixel_size: f64,
    /// Sky patches: 145, 153 (default), 306 or 612.
    pub patches: i32,
    /// TDSM = trunk_ratio x CDSM without a TDSM; default 0.25.
    pub trunk_ratio: f64,
    /// The height at which rays stop; 0 (default): max(max DSM, max CDSM) as UMEP does.
    pub max_height: f64,
    /// Tile side in pixels; 0 (default) lets the library choose. Results never depend on it.
    pub tile: i64,
    /// Also compute the per-patch visibility matrices in [`Context::svf_sky`].
    pub matrices: bool,
}

impl SvfOptions {
    /// The defaults at this pixel size.
    pub fn new(pixel_size: f64) -> Self {
        SvfOptions { pixel_size, patches: 153, trunk_ratio: 0.25, max_height: 0.0, tile: 0, matrices: false }
    }

    fn raw(&self) -> Result<sys::accel_svf_options> {
        let mut o = sys::accel_svf_options::default();
        check(unsafe { sys::accel_svf_options_init(&mut o, std::mem::size_of_val(&o)) }, std::ptr::null())?;
        o.pixel_size = self.pixel_size;
        o.patches = self.patches;
        o.trunk_ratio = self.trunk_ratio;
        o.max_height = self.max_height;
        o.tile = self.tile;
        Ok(o)
    }
}

/// The shadow grids of one sun position: 1 where sunlit, 0 where shaded.
#[derive(Clone, Debug, PartialEq)]
pub struct Shadows {
    /// Building shadow.
    pub sh: Vec<f32>,
    /// Vegetation shadow outside building shadow (all 1 without a CDSM).
    pub vegsh: Vec<f32>,
    /// Vegetation shading before a building shadow (all 1 without a CDSM).
    pub vbshvegsh: Vec<f32>,
}

/// Sky view factor grids (5 without vegetation, 15 with), and the bit-packed
/// matrices when asked for: `u8 [rows, cols, ceil(P / 8)]`, patch p in bit
/// `p % 8` of byte `p / 8`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SkyView {
    /// `(name, grid)` in UMEP's order.
    pub grids: Vec<(&'static str, Vec<f32>)>,
    /// `(name, matrix)`.
    pub matrices: Vec<(&'static str, Vec<u8>)>,
}

impl SkyView {
    /// The grid of this name (`"svf"`, `"svfEveg"`, ...).
    pub fn grid(&self, name: &str) -> Option<&[f32]> {
        self.grids.iter().find(|(n, _)| *n == name).map(|(_, g)| g.as_slice())
    }

    /// The matrix of this name (`"shmat"`, ...).
    pub fn matrix(&self, name: &str) -> Option<&[u8]> {
        self.matrices.iter().find(|(n, _)| *n == name).map(|(_, m)| m.as_slice())
    }
}

/// The name of grid `g` (0..15), as the library gives it.
pub fn grid_name(g: i32) -> Option<&'static str> {
    let p = unsafe { sys::accel_svf_grid_name(g) };
    if p.is_null() {
        None
    } else {
        unsafe { CStr::from_ptr(p) }.to_str().ok()
    }
}

/// The sky patches of a patch option (145, 153, 306, 612): their azimuths and
/// altitudes in degrees, in UMEP's order (the matrices' bit order).
pub fn patches(option: i32) -> Result<(Vec<f64>, Vec<f64>)> {
    let mut n = 0i32;
    let s = unsafe { sys::accel_svf_patches(option, &mut n, std::ptr::null_mut(), std::ptr::null_mut()) };
    if s != sys::accel_status::ACCEL_OK {
        return Err(Error { status: s, message: format!("patch option {option}: 145, 153, 306 or 612") });
    }
    let (mut az, mut alt) = (vec![0f64; n as usize], vec![0f64; n as usize]);
    check(unsafe { sys::accel_svf_patches(option, &mut n, az.as_mut_ptr(), alt.as_mut_ptr()) }, std::ptr::null())?;
    Ok((az, alt))
}

/// The halo of tiles of a grid (`accel_svf_halo`): how many rows and columns
/// beyond a tile the rays that can change its pixels read. A window of a tile
/// and this halo (clipped to the grid), run with `max_height` set to the whole
/// grid's stop height, gives the tile's pixels the whole grid's values.
/// `lowest` and `highest` are the grid's lowest DSM height and highest top
/// (DSM, CDSM + DSM, TDSM + DSM); `sun` is `(azimuth, altitude)` for shadows,
/// None for the sky of `options.patches`. Of the options, pixel_size, patches
/// and max_height are used (0: `highest`).
///
/// ```
/// use libaccel::{svf, SvfOptions};
/// // a 5 m wall, a sun in the south at 45 degrees, 1 m pixels: about 5 rows
/// let (rows, cols) = svf::halo(&SvfOptions::new(1.0), [50, 50], 0.0, 5.0, Some((180.0, 45.0))).unwrap();
/// assert!((5..=6).contains(&rows) && cols == 0);
/// ```
pub fn halo(
    options: &SvfOptions,
    shape: [usize; 2],
    lowest: f64,
    highest: f64,
    sun: Option<(f64, f64)>,
) -> Result<(usize, usize)> {
    let o = options.raw()?;
    let dims = [i64::try_from(shape[0]), i64::try_from(shape[1])];
    let (rows, cols) = match dims {
        [Ok(r), Ok(c)] => (r, c),
        _ => return Err(Error::invalid(format!("a grid of {shape:?} cells is too large"))),
    };
    let sun = sun.map(|(az, alt)| [az, alt]);
    let (mut hr, mut hc) = (0i64, 0i64);
    check(
        unsafe {
            sys::accel_svf_halo(
                &o,
                rows,
                cols,
                lowest,
                highest,
                sun.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
                &mut hr,
                &mut hc,
            )
        },
        std::ptr::null(),
    )?;
    Ok((hr as usize, hc as usize))
}

impl Context {
    /// UMEP's `shadowingfunction_20` for a sun at `azimuth` (degrees
    /// clockwise from north) and `altitude` (degrees above the horizon).
    ///
    /// ```
    /// use libaccel::{Context, Surface, SvfOptions};
    /// let ctx = Context::cpu().unwrap();
    /// let mut dsm = vec![0f32; 9 * 9];
    /// dsm[4 * 9 + 4] = 10.0; // a 10 m pillar in the middle
    /// let s = ctx.svf_shadows(&Surface::new(&dsm, [9, 9]), 180.0, 45.0, &SvfOptions::new(1.0)).unwrap();
    /// assert_eq!(s.sh[3 * 9 + 4], 0.0); // north of it (row 0 is north): shaded by a sun in the south
    /// assert_eq!(s.sh[5 * 9 + 4], 1.0);
    /// ```
    pub fn svf_shadows(
        &self,
        surface: &Surface<'_>,
        azimuth: f64,
        altitude: f64,
        options: &SvfOptions,
    ) -> Result<Shadows> {
        let ins = surface.views()?;
        let o = options.raw()?;
        let (sh, a_sh) = output::<f32>(&surface.shape, "sh")?;
        let (vegsh, a_veg) = output::<f32>(&surface.shape, "vegsh")?;
        let (vbshvegsh, a_vb) = output::<f32>(&surface.shape, "vbshvegsh")?;
        self.check(unsafe {
            sys::accel_svf_shadows(
                self.raw(),
                ptr(&ins[0]),
                ptr(&ins[1]),
                ptr(&ins[2]),
                azimuth,
                altitude,
                &o,
                &a_sh,
                &a_veg,
                &a_vb,
            )
        })?;
        Ok(Shadows { sh, vegsh, vbshvegsh })
    }

    /// UMEP's `svfForProcessing153`: the 5 building grids, and the 10
    /// vegetation grids with a CDSM; with `options.matrices` the matrices too.
    pub fn svf_sky(&self, surface: &Surface<'_>, options: &SvfOptions) -> Result<SkyView> {
        let ins = surface.views()?;
        let o = options.raw()?;
        let veg = surface.cdsm.is_some();
        let mut out = SkyView::default();
        let mut grids: [Option<sys::accel_array>; 15] = [None; 15];
        for (g, slot) in grids.iter_mut().enumerate().take(if veg { 15 } else { 5 }) {
            let (v, a) = output::<f32>(&surface.shape, GRID_NAMES[g])?;
            out.grids.push((GRID_NAMES[g], v));
            *slot = Some(a);
        }
        let mut mats: [Option<sys::accel_array>; 3] = [None; 3];
        if options.matrices {
            let (n, _) = patches(options.patches)?;
            let shape = [surface.shape[0], surface.shape[1], (n.len() + 7) / 8];
            for (m, slot) in mats.iter_mut().enumerate().take(if veg { 3 } else { 1 }) {
                let (v, a) = output::<u8>(&shape, MATRIX_NAMES[m])?;
                out.matrices.push((MATRIX_NAMES[m], v));
                *slot = Some(a);
            }
        }
        let gp: Vec<*const sys::accel_array> = grids.iter().map(ptr).collect();
        let mp: Vec<*const sys::accel_array> = mats.iter().map(ptr).collect();
        self.check(unsafe {
            sys::accel_svf_sky(
                self.raw(),
                ptr(&ins[0]),
                ptr(&ins[1]),
                ptr(&ins[2]),
                &o,
                gp.as_ptr(),
                if options.matrices { mp.as_ptr() } else { std::ptr::null() },
            )
        })?;
        Ok(out)
    }
}
