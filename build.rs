//! Generates the C header from the Rust sources with cbindgen.
//!
//! The generated text always goes to `$OUT_DIR/latte.h`. The committed copy,
//! `include/latte.h`, is written only with `LATTE_HEADER=write` (`make
//! header`); with `LATTE_HEADER=check` (`make test`) the build fails when the
//! committed copy differs from what the sources generate.

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-changed=include/latte.h");
    println!("cargo:rerun-if-env-changed=LATTE_HEADER");
    // The shared library's SONAME carries the major version: programs linked
    // against liblatte.so.0.x.y record liblatte.so.0 and load any 0.* release.
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap();
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,liblatte.so.{major}");
    let mut config = cbindgen::Config::from_file(format!("{dir}/cbindgen.toml")).expect("cbindgen.toml");
    // Version macros from Cargo.toml's version (latte_version() returns the
    // library's own at run time).
    let v = |k: &str| std::env::var(format!("CARGO_PKG_VERSION_{k}")).unwrap();
    let version = format!(
        "\n/* Version of this header (latte_version() gives the loaded library's). */\n#define LATTE_VERSION_MAJOR {}\n#define LATTE_VERSION_MINOR {}\n#define LATTE_VERSION_PATCH {}\n#define LATTE_VERSION_STRING \"{}\"\n",
        v("MAJOR"),
        v("MINOR"),
        v("PATCH"),
        std::env::var("CARGO_PKG_VERSION").unwrap()
    );
    config.after_includes = Some(config.after_includes.unwrap_or_default() + &version);
    let bindings = match cbindgen::Builder::new().with_crate(&dir).with_config(config).generate() {
        Ok(b) => b,
        Err(e) => panic!("cbindgen failed: {e}"),
    };
    let out = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("latte.h");
    bindings.write_to_file(&out);
    let committed = format!("{dir}/include/latte.h");
    match std::env::var("LATTE_HEADER").as_deref() {
        Ok("write") => {
            bindings.write_to_file(&committed);
        }
        Ok("check") => {
            let want = std::fs::read(&out).unwrap();
            let have = std::fs::read(&committed).unwrap_or_default();
            if want != have {
                panic!("include/latte.h differs from what the Rust sources generate ({}); run `make header` and commit it", out.display());
            }
        }
        _ => {}
    }
}
