//! Shadows and sky view factors against UMEP's outputs (tests/data/svf).
mod common;
use common::{differences, npy};
use libaccel::{svf, Context, Status, Surface, SvfOptions};

const CITY: &str = "svf/city_96x128_2m";

fn grid(name: &str) -> Vec<f32> {
    npy(&format!("{CITY}/{name}.npy.gz")).f32()
}

#[test]
fn shadows_and_sky_view_factors_equal_umep() {
    let ctx = Context::cpu().unwrap();
    let dsm = npy(&format!("{CITY}/dsm.npy.gz"));
    let shape = dsm.shape2();
    let (dsm, cdsm, tdsm) = (dsm.f32(), grid("cdsm"), grid("tdsm"));
    let surface = Surface::new(&dsm, shape).with_vegetation(&cdsm, Some(&tdsm));
    let o = SvfOptions::new(2.0);
    for (az, alt) in [("90", "30"), ("180", "60"), ("247.5", "12")] {
        let s = ctx.svf_shadows(&surface, az.parse().unwrap(), alt.parse().unwrap(), &o).unwrap();
        for (name, got) in [("sh", &s.sh), ("vegsh", &s.vegsh), ("vbshvegsh", &s.vbshvegsh)] {
            let want = grid(&format!("shadow_az{az}_alt{alt}_{name}"));
            assert_eq!(differences(got, &want), 0, "{name} at {az}/{alt}");
        }
    }
    let sky = ctx.svf_sky(&surface, &SvfOptions { tile: 40, ..o.clone() }).unwrap();
    assert_eq!(sky.grids.len(), 15);
    for name in svf::GRID_NAMES {
        let want = grid(&format!("svf_{name}"));
        assert_eq!(differences(sky.grid(name).unwrap(), &want), 0, "{name}");
    }
    assert_eq!(svf::grid_name(5), Some("svfveg"));
}

#[test]
fn matrices_agree_with_the_grid() {
    // without vegetation: svf is the sum of the visible patches' weights, so a
    // pixel seeing every patch has svf 1 and its matrix bits all set
    let ctx = Context::cpu().unwrap();
    let mut dsm = vec![0f32; 12 * 12];
    for c in 0..12 {
        dsm[6 * 12 + c] = 8.0; // a wall across the middle
    }
    let o = SvfOptions { matrices: true, patches: 145, ..SvfOptions::new(1.0) };
    let sky = ctx.svf_sky(&Surface::new(&dsm, [12, 12]), &o).unwrap();
    let (az, alt) = svf::patches(145).unwrap();
    assert_eq!((az.len(), alt.len()), (145, 145));
    let m = sky.matrix("shmat").unwrap();
    assert_eq!(m.len(), 12 * 12 * 19);
    let s = sky.grid("svf").unwrap();
    let top = 6 * 12 + 5; // on the wall: nothing higher anywhere
    assert!(m[top * 19..top * 19 + 18].iter().all(|&b| b == 0xff) && m[top * 19 + 18] == 0x01);
    assert!((s[top] - 1.0).abs() < 1e-6, "svf on the wall {}", s[top]);
    let below = 7 * 12 + 5; // next to the wall: half the low sky hidden
    assert!(s[below] < 0.9);
    let hidden = (0..145).filter(|p| m[below * 19 + p / 8] >> (p % 8) & 1 == 0).count();
    assert!(hidden > 0);
}

#[test]
fn bad_grids_are_errors() {
    let ctx = Context::cpu().unwrap();
    let dsm = [1f32; 12];
    let e = ctx.svf_shadows(&Surface::new(&dsm, [3, 4]), 180.0, 45.0, &SvfOptions::new(0.0)).unwrap_err();
    assert_eq!(e.status, Status::ACCEL_ERR_INVALID_ARG);
    assert!(e.message.contains("pixel_size"), "{}", e.message);
    let e = ctx.svf_shadows(&Surface::new(&dsm, [3, 4]), 180.0, 95.0, &SvfOptions::new(1.0)).unwrap_err();
    assert!(e.message.contains("altitude"), "{}", e.message);
    let e = ctx.svf_sky(&Surface::new(&dsm, [5, 4]), &SvfOptions::new(1.0)).unwrap_err();
    assert_eq!(e.status, Status::ACCEL_ERR_INVALID_ARG);
    assert_eq!(svf::patches(100).unwrap_err().status, Status::ACCEL_ERR_INVALID_ARG);
}

#[test]
fn a_chunk_with_the_halo_equals_the_whole_grid() {
    let ctx = Context::cpu().unwrap();
    let dsm = npy(&format!("{CITY}/dsm.npy.gz"));
    let [rows, cols] = dsm.shape2();
    let (dsm, cdsm) = (dsm.f32(), grid("cdsm"));
    // the extent, computed here: lowest DSM height, highest canopy top, UMEP's stop height
    let lowest = dsm.iter().fold(f64::INFINITY, |m, &v| m.min(v as f64));
    let highest = dsm.iter().zip(&cdsm).fold(0f64, |m, (&d, &c)| m.max(d as f64 + c as f64));
    let stop = dsm.iter().chain(&cdsm).fold(0f64, |m, &v| m.max(v as f64));
    // 20 m pixels keep the halo smaller than the grid
    let o = SvfOptions { max_height: stop, ..SvfOptions::new(20.0) };
    let (hr, hc) = svf::halo(&o, [rows, cols], lowest, highest, None).unwrap();
    assert!(hr > 0 && hc > 0 && hr < rows / 2 && hc < cols / 2, "halo {hr} x {hc}");
    let whole = ctx.svf_sky(&Surface::new(&dsm, [rows, cols]).with_vegetation(&cdsm, None), &o).unwrap();
    // the top-left quarter, alone on its window
    let (r1, c1) = (rows / 2, cols / 2);
    let (wr, wc) = (r1 + hr, c1 + hc);
    let cut = |g: &[f32]| -> Vec<f32> { (0..wr).flat_map(|r| g[r * cols..r * cols + wc].to_vec()).collect() };
    let (wd, wcd) = (cut(&dsm), cut(&cdsm));
    let part = ctx.svf_sky(&Surface::new(&wd, [wr, wc]).with_vegetation(&wcd, None), &o).unwrap();
    for name in svf::GRID_NAMES {
        let (w, p) = (whole.grid(name).unwrap(), part.grid(name).unwrap());
        let differ =
            (0..r1).flat_map(|r| (0..c1).map(move |c| (r, c))).filter(|&(r, c)| w[r * cols + c] != p[r * wc + c]);
        assert_eq!(differ.count(), 0, "{name}");
    }
    assert_eq!(svf::halo(&o, [0, 5], 0.0, 1.0, None).unwrap_err().status, Status::ACCEL_ERR_INVALID_ARG);
}
