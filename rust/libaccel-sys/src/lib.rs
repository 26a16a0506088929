//! Raw bindings to libaccel's C ABI (`#include <accel/accel.h>`), generated
//! by bindgen from the installed headers at build time. Every `accel_*`
//! function, type and `ACCEL_*` constant is here under its C name; the safe
//! wrapper is the `libaccel` crate.
//!
//! Enums are newtypes over their C integer (`accel_status(pub u32)` with
//! associated constants such as `accel_status::ACCEL_ERR_DECODE`), so values
//! a newer library adds are representable. Structs that grow are prepared by
//! their `*_init(&mut s, size_of_val(&s))` function before use, as in C.
#![allow(non_upper_case_globals, non_camel_case_types, non_snake_case)]
#![allow(clippy::all)]

include!(concat!(env!("OUT_DIR"), "/bindings.rs"));

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn links_the_library_of_these_headers() {
        assert_eq!(unsafe { accel_version_number() }, ACCEL_VERSION_NUMBER);
        assert_eq!(unsafe { accel_abi_version() }, ACCEL_ABI_VERSION);
    }

    #[test]
    fn statuses_are_open_ended() {
        let name = |s| unsafe { CStr::from_ptr(accel_status_string(s)) }.to_str().unwrap();
        assert_eq!(name(accel_status::ACCEL_ERR_DECODE), "ACCEL_ERR_DECODE");
        // a code this library does not know is a value, not undefined behaviour
        assert_eq!(name(accel_status(1000)), "ACCEL_ERR_UNKNOWN");
    }
}
