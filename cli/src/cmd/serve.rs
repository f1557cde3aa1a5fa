//! `latte serve REGION...`: checks the region names given, then hands
//! them to the HTTP exporter (`crate::serve`).

use crate::exit::{fail, EXIT_USAGE};
use crate::export;
use crate::serve;
use crate::target::{classify, invalid_name_text, shown, Target};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;
use std::time::Duration;

/// `latte serve`: checks the names, then serves until killed.
pub fn run(regions: Vec<OsString>, listen: std::net::SocketAddr, export: export::Options, interval: Duration) -> Result<(), ExitCode> {
    let mut names = Vec::new();
    for r in regions {
        let text = shown(r.as_bytes());
        match classify(&r) {
            Target::Region(n) if latte::shm::validate_name(&n).is_ok() => names.push(n),
            Target::Region(n) => return Err(fail(&text, &invalid_name_text(&n), EXIT_USAGE)),
            Target::File(_) => return Err(fail(&text, "serve reads shared-memory regions (`/name`), not files", EXIT_USAGE)),
        }
    }
    names.sort();
    names.dedup();
    serve::run(serve::ServeOpts { listen, interval, export: export::Options { regions: names, ..export } })
}
