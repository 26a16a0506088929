//! Finds libaccel through pkg-config (`accel.pc`; set PKG_CONFIG_PATH for a
//! library outside the system's directories) and generates the bindings
//! from the headers pkg-config points at, so they always match the library
//! that is linked.
use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=wrapper.h");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let library = match pkg_config::Config::new().atleast_version("0.1").probe("accel") {
        Ok(library) => library,
        Err(e) => panic!(
            "libaccel was not found through pkg-config ({e}); install it, or point \
             PKG_CONFIG_PATH at the directory holding its accel.pc"
        ),
    };
    let mut builder = bindgen::Builder::default()
        .header("wrapper.h")
        .allowlist_function("accel_.*")
        .allowlist_type("accel_.*")
        .allowlist_var("ACCEL_.*")
        // Statuses are a newtype over the C integer, never a Rust enum: a code
        // added by a newer library is a value like any other, not undefined
        // behaviour. The other named enums are newtypes for the same reason.
        .newtype_enum("accel_.*")
        .size_t_is_usize(true)
        .layout_tests(true)
        .derive_default(true);
    for dir in &library.include_paths {
        builder = builder.clang_arg(format!("-I{}", dir.display()));
        println!("cargo:rerun-if-changed={}", dir.join("accel").display());
    }
    let bindings = builder.generate().expect("bindgen could not parse accel/accel.h (is libclang installed?)");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("bindings.rs");
    bindings.write_to_file(&out).expect("cannot write the bindings");
}
