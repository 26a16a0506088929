//! Pore segmentation of CT volumes (`accel/ct.h`): volumes are slices in C
//! order with a shape `[z, y, x]`; masks are `u8`, nonzero = true.
use crate::array::{output, view, Element};
use crate::context::Context;
use crate::error::{check, Result};
use libaccel_sys as sys;
use std::ptr::NonNull;

/// A volume's shape, `[z, y, x]`.
pub type Shape3 = [usize; 3];

/// The comparison of a threshold: `value <compare> threshold` is solid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Compare {
    /// `>`
    Greater,
    /// `>=`
    GreaterEqual,
    /// `<`
    Less,
    /// `<=`
    LessEqual,
}

impl Compare {
    fn raw(self) -> sys::accel_ct_compare {
        sys::accel_ct_compare(self as u32)
    }
}

/// Voxel connectivity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Connectivity {
    /// 6-connected (SciPy's default for fill holes).
    Faces,
    /// 26-connected.
    Corners,
}

impl Connectivity {
    fn raw(self) -> sys::accel_ct_connectivity {
        match self {
            Connectivity::Faces => sys::accel_ct_connectivity::ACCEL_CT_FACES,
            Connectivity::Corners => sys::accel_ct_connectivity::ACCEL_CT_CORNERS,
        }
    }
}

/// How the watershed breaks ties between equally low markers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ties {
    /// scikit-image's heap order, reproduced exactly.
    Skimage,
    /// Equal-valued markers in C order.
    Stable,
}

impl Ties {
    fn raw(self) -> sys::accel_ct_ties {
        sys::accel_ct_ties(self as u32)
    }
}

/// Which voxels are pores in the pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pores {
    /// Closed voids: fill_holes(solid) and not solid.
    Closed,
    /// Every voxel that is not solid.
    All,
}

/// The watershed's options (`accel_ct_watershed_options`), scikit-image's
/// `watershed` keywords; `Default` gives its defaults.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WatershedOptions {
    /// How ties between equally low markers are broken; default `Ties::Skimage`.
    pub ties: Ties,
    /// Neighbours at most this many orthogonal steps away: 1 faces (default),
    /// 2 edges, 3 corners (scikit-image's `connectivity`).
    pub connectivity: u32,
    /// Leave the voxels where two basins meet at label 0 (`watershed_line`).
    pub watershed_line: bool,
    /// The compact watershed's weight of the distance to the marker (`compactness`); default 0.
    pub compactness: f64,
}

impl Default for WatershedOptions {
    fn default() -> Self {
        WatershedOptions { ties: Ties::Skimage, connectivity: 1, watershed_line: false, compactness: 0.0 }
    }
}

/// The peak search and SNOW's trims (`accel_ct_marker_options`); `Default`
/// gives the library's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct MarkerOptions {
    /// Peaks closer than this (Chebyshev, voxels) are suppressed; default 3.
    pub min_distance: i32,
    /// Gaussian smoothing (voxels) of the distance map for the peak search; default 0.
    pub smooth_sigma: f64,
    /// PoreSpy's trim_saddle_points; default false.
    pub trim_saddles: bool,
    /// PoreSpy's trim_nearby_peaks; default false.
    pub trim_nearby: bool,
    /// PoreSpy's maxiter of the saddle trim; default 20.
    pub saddle_iterations: i32,
    /// PoreSpy's f of the nearby trim; default 1.
    pub nearby_factor: f64,
    /// Voxel size for the nearby trim's distances; default 1, 1, 1.
    pub spacing: [f64; 3],
}

impl Default for MarkerOptions {
    fn default() -> Self {
        MarkerOptions {
            min_distance: 3,
            smooth_sigma: 0.0,
            trim_saddles: false,
            trim_nearby: false,
            saddle_iterations: 20,
            nearby_factor: 1.0,
            spacing: [1.0; 3],
        }
    }
}

fn trim_flags(saddles: bool, nearby: bool) -> u32 {
    (if saddles { sys::ACCEL_CT_TRIM_SADDLES } else { 0 }) | (if nearby { sys::ACCEL_CT_TRIM_NEARBY } else { 0 })
}

/// The pipeline's options (`accel_ct_pipeline_options`); `Default` gives the
/// library's defaults (threshold 0).
#[derive(Clone, Debug, PartialEq)]
pub struct SegmentOptions {
    /// Solid = input `compare` threshold.
    pub threshold: f64,
    /// Default [`Compare::Greater`].
    pub compare: Compare,
    /// Connectivity of fill holes; default [`Connectivity::Faces`].
    pub fill_connectivity: Connectivity,
    /// Default [`Pores::Closed`].
    pub pores: Pores,
    /// Voxel size `[z, y, x]`; default 1, 1, 1.
    pub spacing: [f64; 3],
    /// The peak search and trims (its spacing is not used: the pipeline's is).
    pub markers: MarkerOptions,
    /// Default [`Ties::Skimage`].
    pub ties: Ties,
}

impl Default for SegmentOptions {
    fn default() -> Self {
        SegmentOptions {
            threshold: 0.0,
            compare: Compare::Greater,
            fill_connectivity: Connectivity::Faces,
            pores: Pores::Closed,
            spacing: [1.0; 3],
            markers: MarkerOptions::default(),
            ties: Ties::Skimage,
        }
    }
}

/// A pore body: the voxels of one label.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Region {
    /// Its label.
    pub label: u32,
    /// Voxels.
    pub voxels: u64,
    /// Volume in spacing units.
    pub volume: f64,
    /// Radius of the sphere of that volume.
    pub equivalent_radius: f64,
    /// Mean voxel centre, `[z, y, x]` times spacing.
    pub centroid: [f64; 3],
    /// The largest distance-map value inside.
    pub inscribed_radius: f64,
}

/// A throat between regions `a < b`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Throat {
    /// The smaller label.
    pub a: u32,
    /// The larger label.
    pub b: u32,
    /// Shared voxel faces.
    pub faces: u64,
    /// Their area.
    pub area: f64,
    /// Max over the shared faces of min(edt on one side, edt on the other).
    pub inscribed_radius: f64,
}

/// A pore network, copied out of the library.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Network {
    /// Labelled voxels / all voxels.
    pub porosity: f64,
    /// By label.
    pub regions: Vec<Region>,
    /// By (a, b).
    pub throats: Vec<Throat>,
}

impl Network {
    /// Copies a network out and destroys the handle.
    fn take(ptr: *mut sys::accel_ct_network) -> Result<Network> {
        struct Guard(*mut sys::accel_ct_network);
        impl Drop for Guard {
            fn drop(&mut self) {
                unsafe { sys::accel_ct_network_destroy(self.0) }
            }
        }
        let g = Guard(ptr);
        let (mut nr, mut nt, mut porosity) = (0usize, 0usize, 0f64);
        check(unsafe { sys::accel_ct_network_info(g.0, &mut nr, &mut nt, &mut porosity) }, std::ptr::null())?;
        let mut net = Network { porosity, regions: Vec::with_capacity(nr), throats: Vec::with_capacity(nt) };
        for i in 0..nr {
            let mut r = sys::accel_ct_region {
                struct_size: std::mem::size_of::<sys::accel_ct_region>() as u32,
                ..Default::default()
            };
            check(unsafe { sys::accel_ct_network_region(g.0, i, &mut r) }, std::ptr::null())?;
            net.regions.push(Region {
                label: r.label,
                voxels: r.voxels,
                volume: r.volume,
                equivalent_radius: r.equivalent_radius,
                centroid: r.centroid,
                inscribed_radius: r.inscribed_radius,
            });
        }
        for i in 0..nt {
            let mut t = sys::accel_ct_throat {
                struct_size: std::mem::size_of::<sys::accel_ct_throat>() as u32,
                ..Default::default()
            };
            check(unsafe { sys::accel_ct_network_throat(g.0, i, &mut t) }, std::ptr::null())?;
            net.throats.push(Throat {
                a: t.a,
                b: t.b,
                faces: t.faces,
                area: t.area,
                inscribed_radius: t.inscribed_radius,
            });
        }
        Ok(net)
    }
}

/// Everything a pipeline run computes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Segmentation {
    /// Solid voxels (0/1).
    pub solid: Vec<u8>,
    /// Solid with its holes filled (0/1).
    pub filled: Vec<u8>,
    /// Pore voxels (0/1).
    pub pores: Vec<u8>,
    /// The distance map of the pores.
    pub edt: Vec<f32>,
    /// The markers, numbered 1..=marker_count.
    pub markers: Vec<i32>,
    /// The watershed's labels.
    pub labels: Vec<i32>,
    /// Markers found.
    pub marker_count: u32,
    /// The pore network of the labels.
    pub network: Network,
}

impl Context {
    /// `volume <compare> threshold` as 0/1. `volume`: u8, i16, u16, i32 or f32.
    pub fn ct_threshold<T: Element>(
        &self,
        volume: &[T],
        shape: Shape3,
        threshold: f64,
        compare: Compare,
    ) -> Result<Vec<u8>> {
        let input = view(volume, &shape, "volume")?;
        let (out, o) = output::<u8>(&shape, "solid")?;
        self.check(unsafe { sys::accel_ct_threshold(self.raw(), &input, threshold, compare.raw(), &o) })?;
        Ok(out)
    }

    /// SciPy's `binary_fill_holes`.
    pub fn ct_fill_holes(&self, mask: &[u8], shape: Shape3, connectivity: Connectivity) -> Result<Vec<u8>> {
        let m = view(mask, &shape, "mask")?;
        let (out, o) = output::<u8>(&shape, "filled")?;
        self.check(unsafe { sys::accel_ct_fill_holes(self.raw(), &m, connectivity.raw(), &o) })?;
        Ok(out)
    }

    /// SciPy's `distance_transform_edt(mask, sampling=spacing)` as f32.
    pub fn ct_edt(&self, mask: &[u8], shape: Shape3, spacing: [f64; 3]) -> Result<Vec<f32>> {
        let m = view(mask, &shape, "mask")?;
        let (out, o) = output::<f32>(&shape, "edt")?;
        self.check(unsafe { sys::accel_ct_edt(self.raw(), &m, spacing.as_ptr(), &o) })?;
        Ok(out)
    }

    /// scikit-image's `peak_local_max` markers of a distance map, numbered
    /// 1..=n, and n.
    pub fn ct_markers(
        &self,
        edt: &[f32],
        mask: &[u8],
        shape: Shape3,
        options: &MarkerOptions,
    ) -> Result<(Vec<i32>, u32)> {
        let (e, m) = (view(edt, &shape, "edt")?, view(mask, &shape, "mask")?);
        let mut o = sys::accel_ct_marker_options::default();
        check(unsafe { sys::accel_ct_marker_options_init(&mut o, std::mem::size_of_val(&o)) }, std::ptr::null())?;
        o.min_distance = options.min_distance;
        o.smooth_sigma = options.smooth_sigma;
        o.trim = trim_flags(options.trim_saddles, options.trim_nearby);
        o.saddle_iterations = options.saddle_iterations;
        o.nearby_factor = options.nearby_factor;
        o.spacing = options.spacing;
        let (out, a) = output::<i32>(&shape, "markers")?;
        let mut count = 0u32;
        self.check(unsafe { sys::accel_ct_markers(self.raw(), &e, &m, &o, &a, &mut count) })?;
        Ok((out, count))
    }

    /// scikit-image's `watershed(image, markers, mask=mask)`, connectivity 1.
    pub fn ct_watershed(
        &self,
        image: &[f32],
        markers: &[i32],
        mask: Option<&[u8]>,
        shape: Shape3,
        ties: Ties,
    ) -> Result<Vec<i32>> {
        self.ct_watershed_with(image, markers, mask, shape, &WatershedOptions { ties, ..Default::default() })
    }

    /// scikit-image's `watershed(image, markers, mask=mask, connectivity=...,
    /// compactness=..., watershed_line=...)`.
    pub fn ct_watershed_with(
        &self,
        image: &[f32],
        markers: &[i32],
        mask: Option<&[u8]>,
        shape: Shape3,
        options: &WatershedOptions,
    ) -> Result<Vec<i32>> {
        let (im, mk) = (view(image, &shape, "image")?, view(markers, &shape, "markers")?);
        let ms = mask.map(|m| view(m, &shape, "mask")).transpose()?;
        let mut o = sys::accel_ct_watershed_options::default();
        check(unsafe { sys::accel_ct_watershed_options_init(&mut o, std::mem::size_of_val(&o)) }, std::ptr::null())?;
        o.ties = options.ties.raw();
        o.connectivity = options.connectivity;
        o.watershed_line = options.watershed_line as u32;
        o.compactness = options.compactness;
        let (out, a) = output::<i32>(&shape, "labels")?;
        let mp = ms.as_ref().map_or(std::ptr::null(), |m| m as *const sys::accel_array);
        self.check(unsafe { sys::accel_ct_watershed(self.raw(), &im, &mk, mp, &o, &a) })?;
        Ok(out)
    }

    /// The pore network of a label volume and its distance map.
    pub fn ct_network(&self, labels: &[i32], edt: &[f32], shape: Shape3, spacing: [f64; 3]) -> Result<Network> {
        let (l, e) = (view(labels, &shape, "labels")?, view(edt, &shape, "edt")?);
        let mut p = std::ptr::null_mut();
        self.check(unsafe { sys::accel_ct_network_build(self.raw(), &l, &e, spacing.as_ptr(), &mut p) })?;
        Network::take(p)
    }

    /// The whole pipeline (threshold, fill holes, pores, EDT, markers,
    /// watershed, network) on `volume` (u8, i16, u16, i32 or f32).
    ///
    /// ```
    /// use libaccel::{Context, SegmentOptions};
    /// let ctx = Context::cpu().unwrap();
    /// // a 5^3 solid cube with a one-voxel void in its centre
    /// let mut v = vec![1u8; 125];
    /// v[62] = 0;
    /// let s = ctx.ct_segment(&v, [5, 5, 5], &SegmentOptions::default()).unwrap();
    /// assert_eq!(s.marker_count, 1);
    /// assert_eq!(s.labels[62], 1);
    /// ```
    pub fn ct_segment<T: Element>(
        &self,
        volume: &[T],
        shape: Shape3,
        options: &SegmentOptions,
    ) -> Result<Segmentation> {
        let input = view(volume, &shape, "volume")?;
        let mut po = sys::accel_ct_pipeline_options::default();
        check(unsafe { sys::accel_ct_pipeline_options_init(&mut po, std::mem::size_of_val(&po)) }, std::ptr::null())?;
        po.threshold = options.threshold;
        po.compare = options.compare.raw();
        po.fill_connectivity = options.fill_connectivity.raw();
        po.pores = sys::accel_ct_pores(options.pores as u32);
        po.spacing = options.spacing;
        po.min_distance = options.markers.min_distance;
        po.smooth_sigma = options.markers.smooth_sigma;
        po.ties = options.ties.raw();
        po.trim = trim_flags(options.markers.trim_saddles, options.markers.trim_nearby);
        po.saddle_iterations = options.markers.saddle_iterations;
        po.nearby_factor = options.markers.nearby_factor;
        let mut pl = std::ptr::null_mut();
        self.check(unsafe { sys::accel_ct_pipeline_create(self.raw(), &po, &mut pl) })?;
        let pipeline = PipelineGuard(NonNull::new(pl).expect("accel_ct_pipeline_create without a pipeline"));
        let (solid, a_solid) = output::<u8>(&shape, "solid")?;
        let (filled, a_filled) = output::<u8>(&shape, "filled")?;
        let (pores, a_pores) = output::<u8>(&shape, "pores")?;
        let (edt, a_edt) = output::<f32>(&shape, "edt")?;
        let (markers, a_markers) = output::<i32>(&shape, "markers")?;
        let (labels, a_labels) = output::<i32>(&shape, "labels")?;
        let mut net = std::ptr::null_mut();
        let mut out = sys::accel_ct_outputs::default();
        check(unsafe { sys::accel_ct_outputs_init(&mut out, std::mem::size_of_val(&out)) }, std::ptr::null())?;
        out.solid = &a_solid;
        out.filled = &a_filled;
        out.pores = &a_pores;
        out.edt = &a_edt;
        out.markers = &a_markers;
        out.labels = &a_labels;
        out.network = &mut net;
        self.check(unsafe { sys::accel_ct_pipeline_run(pipeline.0.as_ptr(), &input, std::ptr::null(), &mut out) })?;
        let network = Network::take(net)?;
        Ok(Segmentation { solid, filled, pores, edt, markers, labels, marker_count: out.marker_count, network })
    }
}

struct PipelineGuard(NonNull<sys::accel_ct_pipeline>);

impl Drop for PipelineGuard {
    fn drop(&mut self) {
        unsafe { sys::accel_ct_pipeline_destroy(self.0.as_ptr()) }
    }
}
