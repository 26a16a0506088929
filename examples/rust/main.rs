// examples/rust/main.rs - calling libaccel from Rust through bindgen.
//
//   bindgen include/accel/accel.h --allowlist-function 'accel_.*' --allowlist-var 'ACCEL_.*' \
//       -o bindings.rs -- -Iinclude
//   ACCEL_BINDINGS=$PWD/bindings.rs rustc --edition 2021 main.rs -L <libdir> -l accel
#![allow(non_upper_case_globals, non_camel_case_types, non_snake_case, dead_code)]
include!(env!("ACCEL_BINDINGS"));

use std::ffi::CStr;

fn check(status: accel_status, ctx: *const accel_ctx) {
    if status != accel_status_ACCEL_OK {
        let name = unsafe { CStr::from_ptr(accel_status_string(status)) }.to_string_lossy();
        let msg = unsafe { CStr::from_ptr(accel_last_error(ctx)) }.to_string_lossy();
        panic!("{}: {}", name, msg);
    }
}

fn main() {
    unsafe {
        let version = CStr::from_ptr(accel_version_string()).to_str().unwrap();
        assert_eq!(accel_version_number(), ACCEL_VERSION_NUMBER);
        let mut opts: accel_ctx_options = std::mem::zeroed();
        check(accel_ctx_options_init(&mut opts, std::mem::size_of::<accel_ctx_options>() as _), std::ptr::null());
        opts.backend = accel_backend_kind_ACCEL_BACKEND_CPU;
        let mut ctx: *mut accel_ctx = std::ptr::null_mut();
        check(accel_ctx_create(&opts, &mut ctx), std::ptr::null());

        let rgb: [u8; 6] = [255, 0, 0, 0, 255, 0];
        let mut gray = [0u8; 2];
        let mut src: accel_array = std::mem::zeroed();
        let mut dst: accel_array = std::mem::zeroed();
        check(accel_array_init(&mut src, rgb.as_ptr() as *mut _, accel_dtype_ACCEL_DTYPE_U8, 3, [1i64, 2, 3].as_ptr()), ctx);
        check(accel_array_init(&mut dst, gray.as_mut_ptr() as *mut _, accel_dtype_ACCEL_DTYPE_U8, 2, [1i64, 2].as_ptr()), ctx);
        check(accel_image_to_gray(ctx, &src, &mut dst), ctx);
        assert_eq!(gray, [76, 150], "Pillow's convert('L') of pure red and green");

        // a wrong call returns a status and a message; it never panics or crashes
        let status = accel_image_to_gray(ctx, &dst, &mut src);
        assert_eq!(status, accel_status_ACCEL_ERR_INVALID_ARG);
        let msg = CStr::from_ptr(accel_last_error(ctx)).to_string_lossy().into_owned();
        accel_ctx_destroy(ctx);
        println!("ok: libaccel {} from Rust; gray {:?}; wrong call: {}", version, gray, msg);
    }
}
