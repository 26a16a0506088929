//! Reference data of the C tests (tests/data): NPY files, gzipped or not,
//! read by a parser of its own (the crate under test never reads them).
#![allow(dead_code)]
use std::path::PathBuf;
use std::process::Command;

/// tests/data of the source tree ($ACCEL_TEST_DATA, else found from this crate).
pub fn data_dir() -> PathBuf {
    match std::env::var_os("ACCEL_TEST_DATA") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data"),
    }
}

/// The bytes of a file, through `gzip -dc` when it ends in .gz.
pub fn read(rel: &str) -> Vec<u8> {
    let path = data_dir().join(rel);
    if rel.ends_with(".gz") {
        let out = Command::new("gzip").arg("-dc").arg(&path).output().expect("gzip runs");
        assert!(out.status.success(), "gzip -dc {}", path.display());
        out.stdout
    } else {
        std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }
}

/// A little-endian, C-order NPY array: its dtype descr (e.g. "<i2"), shape and data bytes.
pub struct Npy {
    pub descr: String,
    pub shape: Vec<usize>,
    pub data: Vec<u8>,
}

fn header_value<'a>(header: &'a str, key: &str) -> &'a str {
    let at = header.find(&format!("'{key}'")).unwrap_or_else(|| panic!("NPY header without {key}: {header}"));
    header[at + key.len() + 2..].trim_start_matches(|c: char| c == ':' || c == ' ')
}

pub fn npy(rel: &str) -> Npy {
    let b = read(rel);
    assert_eq!(&b[..6], b"\x93NUMPY", "{rel}: not NPY");
    let (len, start) = if b[6] == 1 {
        (u16::from_le_bytes([b[8], b[9]]) as usize, 10)
    } else {
        (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12)
    };
    let header = std::str::from_utf8(&b[start..start + len]).unwrap();
    assert!(header_value(header, "fortran_order").starts_with("False"), "{rel}: Fortran order");
    let descr = header_value(header, "descr").trim_start_matches('\'');
    let descr = descr[..descr.find('\'').unwrap()].to_string();
    let shape = header_value(header, "shape");
    let shape: Vec<usize> = shape[1..shape.find(')').unwrap()]
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    Npy { descr, shape, data: b[start + len..].to_vec() }
}

impl Npy {
    fn values<T, const N: usize>(&self, descr: &[&str], f: fn([u8; N]) -> T) -> Vec<T> {
        assert!(descr.contains(&self.descr.as_str()), "dtype {} where {:?} was expected", self.descr, descr);
        self.data.chunks_exact(N).map(|c| f(c.try_into().unwrap())).collect()
    }
    pub fn u8(&self) -> Vec<u8> {
        self.values(&["|u1", "|b1"], |b: [u8; 1]| b[0])
    }
    pub fn i16(&self) -> Vec<i16> {
        self.values(&["<i2"], i16::from_le_bytes)
    }
    pub fn i32(&self) -> Vec<i32> {
        self.values(&["<i4"], i32::from_le_bytes)
    }
    pub fn f32(&self) -> Vec<f32> {
        self.values(&["<f4"], f32::from_le_bytes)
    }
    pub fn shape3(&self) -> [usize; 3] {
        self.shape.clone().try_into().expect("a 3-D array")
    }
    pub fn shape2(&self) -> [usize; 2] {
        self.shape.clone().try_into().expect("a 2-D array")
    }
}

/// How many elements differ.
pub fn differences<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).filter(|(x, y)| x != y).count()
}
