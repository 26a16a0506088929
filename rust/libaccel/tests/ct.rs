//! CT stages and the pipeline against SciPy 1.10.1 / scikit-image 0.19.3
//! outputs (tests/data/ct).
mod common;
use common::{differences, npy};
use libaccel::{Compare, Connectivity, Context, MarkerOptions, Pores, SegmentOptions, Status, Ties, WatershedOptions};

struct Refs {
    shape: [usize; 3],
    filled: Vec<u8>,
    pores: Vec<u8>,
    edt: Vec<f32>,
    markers: Vec<i32>,
    labels: Vec<i32>,
}

fn refs(dir: &str) -> Refs {
    let r = |name: &str| npy(&format!("ct/{dir}/{name}.npy.gz"));
    let labels = r("labels");
    Refs {
        shape: labels.shape3(),
        filled: r("filled").u8(),
        pores: r("pores").u8(),
        edt: r("edt").f32(),
        markers: r("markers").i32(),
        labels: labels.i32(),
    }
}

#[test]
fn stages_equal_scipy_and_skimage() {
    let ctx = Context::cpu().unwrap();
    let input = npy("ct/food_aniso_64x96x80_s1/input.npy.gz");
    let (volume, shape) = (input.i16(), input.shape3());
    let want = refs("food_aniso_64x96x80_s1");
    assert_eq!(shape, want.shape);
    let spacing = [2.0, 0.5, 0.5];
    let solid = ctx.ct_threshold(&volume, shape, -300.0, Compare::Greater).unwrap();
    let expect: Vec<u8> = volume.iter().map(|&v| (v > -300) as u8).collect();
    assert_eq!(solid, expect);
    let filled = ctx.ct_fill_holes(&solid, shape, Connectivity::Faces).unwrap();
    assert_eq!(differences(&filled, &want.filled), 0, "fill holes");
    let pores: Vec<u8> = filled.iter().zip(&solid).map(|(&f, &s)| (f != 0 && s == 0) as u8).collect();
    assert_eq!(differences(&pores, &want.pores), 0, "pores");
    let edt = ctx.ct_edt(&want.pores, shape, spacing).unwrap();
    assert_eq!(differences(&edt, &want.edt), 0, "edt");
    let (markers, n) = ctx.ct_markers(&want.edt, &want.pores, shape, &MarkerOptions::default()).unwrap();
    assert_eq!(differences(&markers, &want.markers), 0, "markers");
    assert_eq!(n as i32, *want.markers.iter().max().unwrap());
    let neg: Vec<f32> = want.edt.iter().map(|v| -v).collect();
    let labels = ctx.ct_watershed(&neg, &want.markers, Some(&want.pores), shape, Ties::Skimage).unwrap();
    assert_eq!(differences(&labels, &want.labels), 0, "watershed");
    // the network's voxel counts against a count made here
    let net = ctx.ct_network(&want.labels, &want.edt, shape, spacing).unwrap();
    assert_eq!(net.regions.len(), n as usize);
    for r in &net.regions {
        let voxels = want.labels.iter().filter(|&&l| l == r.label as i32).count() as u64;
        assert_eq!(r.voxels, voxels, "region {}", r.label);
        assert!((r.volume - voxels as f64 * 0.5).abs() < 1e-9);
    }
    let labelled = want.labels.iter().filter(|&&l| l > 0).count() as f64;
    assert!((net.porosity - labelled / want.labels.len() as f64).abs() < 1e-12);
}

#[test]
fn pipelines_equal_the_references() {
    let ctx = Context::cpu().unwrap();
    let food = npy("ct/food_aniso_64x96x80_s1/input.npy.gz");
    let o = SegmentOptions { threshold: -300.0, spacing: [2.0, 0.5, 0.5], ..SegmentOptions::default() };
    let s = ctx.ct_segment(&food.i16(), food.shape3(), &o).unwrap();
    let want = refs("food_aniso_64x96x80_s1");
    check(&s, &want, "food");
    let berea = npy("ct/berea_pore/input.npy.gz");
    let o = SegmentOptions { threshold: 0.0, pores: Pores::All, ..SegmentOptions::default() };
    let s = ctx.ct_segment(&berea.u8(), berea.shape3(), &o).unwrap();
    check(&s, &refs("berea_pore"), "berea");
}

fn check(s: &libaccel::Segmentation, want: &Refs, name: &str) {
    assert_eq!(differences(&s.filled, &want.filled), 0, "{name}: filled");
    assert_eq!(differences(&s.pores, &want.pores), 0, "{name}: pores");
    assert_eq!(differences(&s.edt, &want.edt), 0, "{name}: edt");
    assert_eq!(differences(&s.markers, &want.markers), 0, "{name}: markers");
    assert_eq!(differences(&s.labels, &want.labels), 0, "{name}: labels");
    let n = *want.markers.iter().max().unwrap() as u32;
    assert_eq!(s.marker_count, n, "{name}");
    assert_eq!(s.network.regions.len(), n as usize, "{name}");
}

#[test]
fn bad_volumes_are_errors() {
    let ctx = Context::cpu().unwrap();
    // the crate's check: 10 values cannot have the shape 2 x 3 x 4
    let e = ctx.ct_edt(&[0u8; 10], [2, 3, 4], [1.0; 3]).unwrap_err();
    assert_eq!(e.status, Status::ACCEL_ERR_INVALID_ARG);
    assert!(e.message.contains("24"), "{}", e.message);
    // the library's: a spacing that is not positive
    let e = ctx.ct_edt(&[1u8; 24], [2, 3, 4], [1.0, 0.0, 1.0]).unwrap_err();
    assert_eq!(e.status, Status::ACCEL_ERR_INVALID_ARG);
    assert!(e.message.starts_with("accel_ct_edt"), "{}", e.message);
    // a dtype the threshold does not take
    let e = ctx.ct_threshold(&[1.0f64; 24], [2, 3, 4], 0.5, Compare::Greater).unwrap_err();
    assert_eq!(e.status, Status::ACCEL_ERR_INVALID_ARG);
}

/// The watershed's scikit-image options on cases whose answers are worked out
/// by hand (the same cases as tests/test_ct.c, checked there against
/// scikit-image 0.19.3).
#[test]
fn watershed_options_by_hand() {
    let ctx = Context::cpu().unwrap();
    // a ramp up to the middle: the middle voxel is reached from both basins,
    // so the watershed line takes it
    let ramp = [0.0f32, 1.0, 2.0, 3.0, 2.0, 1.0, 0.0];
    let mk = [1, 0, 0, 0, 0, 0, 2];
    let line = WatershedOptions { watershed_line: true, ..Default::default() };
    let out = ctx.ct_watershed_with(&ramp, &mk, None, [1, 1, 7], &line).unwrap();
    assert_eq!(out, [1, 1, 1, 0, 2, 2, 2]);
    let out = ctx.ct_watershed_with(&ramp, &mk, None, [1, 1, 7], &WatershedOptions::default()).unwrap();
    assert_eq!(out, [1, 1, 1, 1, 2, 2, 2]);
    // a low channel from marker 2 towards marker 1: the plain flood gives x = 3
    // to marker 2, the compact one (10) to marker 1
    let row = [0.0f32, 10.0, 10.0, 10.0, 1.0, 1.0, 1.0, 0.0];
    let mk = [1, 0, 0, 0, 0, 0, 0, 2];
    let plain = ctx.ct_watershed_with(&row, &mk, None, [1, 1, 8], &WatershedOptions::default()).unwrap();
    assert_eq!(plain, [1, 1, 1, 2, 2, 2, 2, 2]);
    let compact = WatershedOptions { compactness: 10.0, ..Default::default() };
    assert_eq!(ctx.ct_watershed_with(&row, &mk, None, [1, 1, 8], &compact).unwrap(), [1, 1, 1, 1, 2, 2, 2, 2]);
    // opposite corners of a 2x2x2 cube: only connectivity 3 joins them
    let cube = [0.0f32; 8];
    let mk = [5, 0, 0, 0, 0, 0, 0, 0];
    let ends = [1u8, 0, 0, 0, 0, 0, 0, 1];
    for c in 1..=3u32 {
        let o = WatershedOptions { connectivity: c, ..Default::default() };
        let out = ctx.ct_watershed_with(&cube, &mk, Some(&ends), [2, 2, 2], &o).unwrap();
        assert_eq!((out[0], out[7]), (5, if c == 3 { 5 } else { 0 }), "connectivity {c}");
    }
    let bad = WatershedOptions { connectivity: 0, ..Default::default() };
    assert!(ctx.ct_watershed_with(&cube, &mk, Some(&ends), [2, 2, 2], &bad).is_err());
}
