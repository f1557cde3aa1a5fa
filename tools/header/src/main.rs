//! Generates the C header `include/latte.h` from the library's Rust sources
//! with cbindgen.
//!
//! `latte-header write` rewrites the committed header (`make header`);
//! `latte-header check` fails when the committed header differs from what
//! the sources generate (`make check-header`, part of `make test`). Only
//! these two targets run cbindgen: building the library does not.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mode = std::env::args().nth(1).unwrap_or_default();
    if mode != "write" && mode != "check" {
        eprintln!("usage: latte-header write|check");
        return ExitCode::from(2);
    }
    // tools/header -> the library's package root.
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let root = root.canonicalize().expect("library root");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let version = manifest
        .lines()
        .skip_while(|l| l.trim() != "[package]")
        .find_map(|l| l.strip_prefix("version = \"").and_then(|r| r.strip_suffix('"')))
        .expect("[package] version in Cargo.toml")
        .to_string();
    let parts: Vec<&str> = version.split('.').collect();
    let mut config = cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml");
    // Version macros from Cargo.toml's version (latte_version() returns the
    // loaded library's own at run time).
    let macros = format!(
        "\n/* Version of this header (latte_version() gives the loaded library's). */\n#define LATTE_VERSION_MAJOR {}\n#define LATTE_VERSION_MINOR {}\n#define LATTE_VERSION_PATCH {}\n#define LATTE_VERSION_STRING \"{}\"\n",
        parts[0], parts[1], parts[2], version
    );
    config.after_includes = Some(config.after_includes.unwrap_or_default() + &macros);
    let bindings = match cbindgen::Builder::new().with_crate(&root).with_config(config).generate() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("latte-header: cbindgen failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut text = Vec::new();
    bindings.write(&mut text);
    let committed = root.join("include/latte.h");
    if mode == "write" {
        std::fs::write(&committed, &text).expect("write include/latte.h");
        println!("latte-header: wrote {}", committed.display());
        return ExitCode::SUCCESS;
    }
    let have = std::fs::read(&committed).unwrap_or_default();
    if have != text {
        eprintln!("latte-header: include/latte.h differs from what the Rust sources generate; run `make header` and commit it");
        return ExitCode::FAILURE;
    }
    println!("latte-header: include/latte.h matches the sources");
    ExitCode::SUCCESS
}
