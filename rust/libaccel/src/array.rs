//! Slices and shapes as the library's array views (`accel_array`).
use crate::error::{check, Error, Result};
use libaccel_sys as sys;
use std::ffi::c_void;

mod sealed {
    pub trait Sealed {}
}

/// An element type the library knows (`accel_dtype`): the integers of 8 to 64
/// bits and `f32`, `f64`. Which ones an operation accepts is its own rule.
pub trait Element: Copy + Default + sealed::Sealed {
    /// The matching `accel_dtype`.
    const DTYPE: sys::accel_dtype;
}

macro_rules! element {
    ($($t:ty => $d:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: sys::accel_dtype = sys::accel_dtype::$d;
        }
    )*};
}
element!(u8 => ACCEL_DTYPE_U8, i8 => ACCEL_DTYPE_I8, u16 => ACCEL_DTYPE_U16, i16 => ACCEL_DTYPE_I16,
         u32 => ACCEL_DTYPE_U32, i32 => ACCEL_DTYPE_I32, u64 => ACCEL_DTYPE_U64, i64 => ACCEL_DTYPE_I64,
         f32 => ACCEL_DTYPE_F32, f64 => ACCEL_DTYPE_F64);

/// Elements of a shape, or an error naming `what` when the product overflows.
pub(crate) fn elements(shape: &[usize], what: &str) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or_else(|| Error::invalid(format!("{what}: the shape {shape:?} has too many elements")))
}

fn describe<T: Element>(ptr: *const T, len: usize, shape: &[usize], what: &str) -> Result<sys::accel_array> {
    let n = elements(shape, what)?;
    if n != len {
        return Err(Error::invalid(format!("{what}: {len} elements given for the shape {shape:?}, which has {n}")));
    }
    if shape.len() > sys::ACCEL_ARRAY_MAX_DIMS as usize {
        return Err(Error::invalid(format!("{what}: {} dimensions, at most 8", shape.len())));
    }
    let mut dims = [0i64; 8];
    for (d, &s) in dims.iter_mut().zip(shape) {
        *d = i64::try_from(s).map_err(|_| Error::invalid(format!("{what}: extent {s} too large")))?;
    }
    let mut a = sys::accel_array::default();
    let status =
        unsafe { sys::accel_array_init(&mut a, ptr as *mut c_void, T::DTYPE, shape.len() as i32, dims.as_ptr()) };
    check(status, std::ptr::null())?;
    Ok(a)
}

/// A view of `data` with `shape` (C order), read by the library.
pub(crate) fn view<T: Element>(data: &[T], shape: &[usize], what: &str) -> Result<sys::accel_array> {
    describe(data.as_ptr(), data.len(), shape, what)
}

/// A view of `data` with `shape` (C order), written by the library.
pub(crate) fn view_mut<T: Element>(data: &mut [T], shape: &[usize], what: &str) -> Result<sys::accel_array> {
    describe(data.as_mut_ptr() as *const T, data.len(), shape, what)
}

/// An owned, zero-filled output of `shape` and its view.
pub(crate) fn output<T: Element>(shape: &[usize], what: &str) -> Result<(Vec<T>, sys::accel_array)> {
    let mut v = vec![T::default(); elements(shape, what)?];
    let a = view_mut(&mut v, shape, what)?;
    Ok((v, a))
}
