//! Hashes against ImageHash 4.3.2 on Pillow 9.4.0 (tests/data/hash/*.tsv).
mod common;
use libaccel::{hash, Context, HashKind, HashOptions, Image, Status};

const KINDS: [(HashKind, &str); 6] = [
    (HashKind::Ahash, "ahash"),
    (HashKind::Dhash, "dhash"),
    (HashKind::DhashVertical, "dhash_vertical"),
    (HashKind::Phash, "phash"),
    (HashKind::Whash, "whash"),
    (HashKind::Colorhash, "colorhash"),
];

/// Rows of the reference tables: file name, then column name -> hex ("error" when Pillow fails).
fn references() -> Vec<(String, Vec<(String, String)>)> {
    let mut rows = Vec::new();
    for table in ["hash/reference.tsv", "hash/generated.tsv"] {
        let text = String::from_utf8(common::read(table)).unwrap();
        let mut lines = text.lines().filter(|l| !l.starts_with('#'));
        let columns: Vec<&str> = lines.next().unwrap().split('\t').collect();
        for line in lines {
            let cells: Vec<&str> = line.split('\t').collect();
            let named = columns.iter().zip(&cells).map(|(c, v)| (c.to_string(), v.to_string())).collect();
            rows.push((cells[0].to_string(), named));
        }
    }
    assert!(rows.len() > 30, "{} reference rows", rows.len());
    rows
}

fn column<'a>(row: &'a [(String, String)], name: &str) -> &'a str {
    &row.iter().find(|(c, _)| c == name).unwrap_or_else(|| panic!("no column {name}")).1
}

fn all_kinds(size: i32) -> HashOptions {
    HashOptions { hash_size: size, ..HashOptions::kinds(&KINDS.map(|k| k.0)) }
}

#[test]
fn files_and_buffers_equal_imagehash() {
    let ctx = Context::cpu().unwrap();
    let rows = references();
    let paths: Vec<_> = rows.iter().map(|(f, _)| common::data_dir().join("hash").join(f)).collect();
    let blobs: Vec<Vec<u8>> = paths.iter().map(|p| std::fs::read(p).unwrap()).collect();
    for size in [8, 16] {
        let files = ctx.hash_files(&paths, &all_kinds(size)).unwrap();
        let buffers = ctx.hash_buffers(&blobs, &all_kinds(size)).unwrap();
        assert_eq!(files.len(), rows.len());
        let mut compared = 0;
        for (i, (name, row)) in rows.iter().enumerate() {
            for (kind, col) in KINDS {
                // colorhash8 is binbits 3, the default; it has no size-16 column
                if kind == HashKind::Colorhash && size == 16 {
                    continue;
                }
                let want = column(row, &format!("{col}{size}"));
                if want == "error" {
                    let e = files.result(i).expect_err(name);
                    assert_ne!(e.status, Status::ACCEL_OK);
                    assert!(!e.message.is_empty(), "{name}: no message");
                    assert_eq!(files.hex(i, kind), None);
                } else {
                    assert_eq!(files.hex(i, kind).as_deref(), Some(want), "{name} {col}{size}");
                    compared += 1;
                }
                assert_eq!(buffers.hex(i, kind), files.hex(i, kind), "{name}: buffer and file differ");
            }
        }
        assert!(compared > 100, "only {compared} hashes compared");
    }
}

#[test]
fn decoded_images_hash_like_their_files() {
    let ctx = Context::cpu().unwrap();
    let rgb = common::npy("decode/hopper.RGB.npy"); // Pillow's convert('RGB') of hash/hopper.jpg
    let [h, w, c] = rgb.shape3();
    let image = Image { pixels: &rgb.data, height: h, width: w, channels: c };
    let got = ctx.hash_images(&[image], &all_kinds(8)).unwrap();
    let rows = references();
    let row = &rows.iter().find(|(f, _)| f == "hopper.jpg").unwrap().1;
    for (kind, col) in KINDS {
        assert_eq!(got.hex(0, kind).as_deref(), Some(column(row, &format!("{col}8"))), "{col}");
    }
    // 64-bit hashes as index words: int(str(hash), 16)
    let dhash = u64::from_str_radix(column(row, "dhash8"), 16).unwrap();
    assert_eq!(got.word(0, HashKind::Dhash), Some(dhash));
}

#[test]
fn hex_and_distance_agree_with_an_independent_count() {
    let a = hash::from_hex("0fe0f0f0f0e00000", 64).unwrap();
    let b = hash::from_hex("1ffff0f0f0f06008", 64).unwrap();
    assert_eq!(hash::to_hex(&a, 64).unwrap(), "0fe0f0f0f0e00000");
    let want = (0x0fe0f0f0f0e00000u64 ^ 0x1ffff0f0f0f06008u64).count_ones();
    assert_eq!(hash::distance(&a, &b, 64).unwrap(), want);
    // colorhash: 42 bits, 11 digits
    assert_eq!(hash::to_hex(&hash::from_hex("090000001b0", 42).unwrap(), 42).unwrap(), "090000001b0");
    let e = hash::from_hex("xyz", 64).unwrap_err();
    assert_eq!(e.status, Status::ACCEL_ERR_INVALID_ARG);
}

#[test]
fn kinds_parse_and_bad_options_are_errors() {
    assert_eq!("average_hash".parse::<HashKind>().unwrap(), HashKind::Ahash);
    assert_eq!("PHASH".parse::<HashKind>().unwrap(), HashKind::Phash);
    assert_eq!("nohash".parse::<HashKind>().unwrap_err().status, Status::ACCEL_ERR_INVALID_ARG);
    assert_eq!(HashKind::Colorhash.bits(8, 3).unwrap(), 42);
    let ctx = Context::cpu().unwrap();
    // whash needs a power of two: the library's own check and message
    let opts = HashOptions { hash_size: 12, ..HashOptions::kinds(&[HashKind::Whash]) };
    let e = ctx.hash_files(&["x.png"], &opts).unwrap_err();
    assert_eq!(e.status, Status::ACCEL_ERR_INVALID_ARG);
    assert!(e.message.contains("power"), "{}", e.message);
    // a missing file fails alone, with the system's reason
    let h = ctx.hash_files(&["/nonexistent/a.jpg"], &HashOptions::default()).unwrap();
    let e = h.result(0).unwrap_err();
    assert_eq!(e.status, Status::ACCEL_ERR_IO);
    assert!(e.to_string().starts_with("ACCEL_ERR_IO: "), "{e}");
    // a slice that does not match its shape is refused before the library sees it
    let px = [0u8; 10];
    let bad = Image { pixels: &px, height: 3, width: 4, channels: 1 };
    assert_eq!(ctx.hash_images(&[bad], &HashOptions::default()).unwrap_err().status, Status::ACCEL_ERR_INVALID_ARG);
}
