//! Safe Rust API of libaccel: perceptual image hashes bit-exact with
//! imagehash, an exact Hamming index, CT pore segmentation identical to
//! SciPy and scikit-image, and UMEP's shadows and sky view factors, on the
//! GPU (CUDA) or the CPU, through the library's C ABI (`libaccel-sys`).
//!
//! Handles (a [`Context`], an [`Index`]) are freed on drop; every call
//! returns a [`Result`] whose [`Error`] carries the library's status and
//! message; inputs are slices with their shapes (C order) and outputs are
//! owned `Vec`s.
//!
//! ```
//! use libaccel::{Context, HashKind, HashOptions, Image};
//! let ctx = Context::cpu().unwrap();
//! let pixels: Vec<u8> = (0..64 * 48).map(|i| (i % 251) as u8).collect();
//! let image = Image { pixels: &pixels, height: 48, width: 64, channels: 1 };
//! let hashes = ctx.hash_images(&[image], &HashOptions::kinds(&[HashKind::Dhash])).unwrap();
//! assert_eq!(hashes.hex(0, HashKind::Dhash).unwrap().len(), 16);
//! ```
#![warn(missing_docs)]

mod array;
mod context;
pub mod ct;
mod error;
pub mod hash;
pub mod index;
pub mod svf;

pub use array::Element;
pub use context::{build_info, version, Backend, Context, ContextOptions, SyncPolicy};
pub use ct::{
    Compare, Connectivity, MarkerOptions, Network, Pores, SegmentOptions, Segmentation, Ties, WatershedOptions,
};
pub use error::{status_name, Error, Result, Status};
pub use hash::{HashKind, HashOptions, Hashes, Image};
pub use index::{groups_from_pairs, Algorithm, Index, Pairs, Rule, SearchOptions};
pub use svf::{Shadows, SkyView, Surface, SvfOptions};

/// The raw bindings, for what this crate does not wrap.
pub use libaccel_sys as sys;
