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
    let config = cbindgen::Config::from_file(format!("{dir}/cbindgen.toml")).expect("cbindgen.toml");
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
