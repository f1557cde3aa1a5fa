//! latte: latency spans timed with the TSC, recorded into per-(thread, ID)
//! single-producer rings that other processes can read live.
//!
//! One engine, four faces: the C ABI (`ffi`, declared in the generated
//! `include/latte.h`; `include/latte_inline.h` inlines the hot path into C
//! and C++ callers), the C++ header (`cpp_compat/Latte.hpp`), the `latte`
//! command (the `cli` crate), and the Rust API below: [`Span`], [`pulse!`],
//! [`snapshot`], [`init_shared_region`], [`own_report`] to record, and
//! [`Mapping`] / [`View`] to read a region, live or flushed.
//!
//! The data flow, one module per step:
//!
//! ```text
//!  Start ──► recorder::hot   ID -> ring through the thread's cache (miss:
//!              │              intern + slot allocation under the registry
//!              │              lock); push (ring, tsc, mode) on the span stack
//!  Stop  ──► recorder::hot   pop, duration, append the sample (ring: W1-W3)
//!              ▼
//!            region, layout   the slot ring: 16-byte samples, write_idx
//!              ▼
//!            reader           validated view, the ring's reader steps R1-R8
//!              ▼
//!            stats            outlier rule, mean/median/std dev/skew/percentiles
//!              ▼
//!            report, trace    the table of DumpToStream, the Chrome trace
//! ```
//!
//! The modules form layers, each importing only from those below it; the
//! map (with what each imports) is in `docs/design.md`, checked against the
//! code by `make test`.
//!
//! ```
//! let _span = latte::Span::start(c"lib.example");
//! ```
//!
//! Every call of the public API that takes a raw pointer is an `unsafe fn`,
//! and the engine's insides are private (the integration tests reach them
//! through the test-only `internals` feature, where the engine's own calls
//! that take a raw ID are `unsafe fn` too; the C exports there are not, as
//! a C prototype has no `unsafe`):
//!
//! ```compile_fail,E0133
//! let t = unsafe { &mut *latte::internals::recorder::current() };
//! latte::internals::recorder::resolve_slot(t, 0x8 as *const core::ffi::c_char);
//! ```

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

// The public API: what the `latte` command and Rust callers use.
pub mod counters;
pub mod error;
pub mod follow;
pub mod layout;
pub mod name;
pub mod pace;
pub mod reader;
pub mod report;
pub mod shm;
pub mod stats;
pub mod trace;

pub use api::{init_shared_region, init_shared_region_with, own_report, own_report_with, pulse_at, snapshot, Mode, PulseSite, RegionConfig, Span};
pub use api::{LATTE_IF_TAKEN_FAIL, LATTE_IF_TAKEN_REPLACE_STALE};
pub use error::Error;
pub use liveness::{remove_region, Removal};
pub use reader::{Mapping, ReadMode, View};
pub use tsc::measure_cycles_per_ns;

/// The Rust examples of docs/api.md, run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/api.md")]
pub struct GuideDoctests;

// The engine: private to the crate.
mod api;
mod calibrate;
mod extract;
mod fault;
mod ffi;
mod flush;
mod intern;
mod liveness;
mod mmap;
mod pause;
mod recorder;
mod region;
mod ring;
mod sched;
mod sigchain;
mod tsc;

/// The engine's insides, for the integration tests only: re-exported with
/// the test-only feature `internals` (which the tests enable, Cargo.toml),
/// hidden from the docs, not an API.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod internals {
    pub mod api {
        pub use crate::api::*;
    }
    pub mod calibrate {
        pub use crate::calibrate::*;
    }
    pub mod extract {
        pub use crate::extract::*;
    }
    pub mod fault {
        pub use crate::fault::*;
    }
    pub mod ffi {
        pub use crate::ffi::*;
    }
    pub mod flush {
        pub use crate::flush::*;
    }
    pub mod intern {
        pub use crate::intern::*;
    }
    pub mod liveness {
        pub use crate::liveness::*;
    }
    pub mod mmap {
        pub use crate::mmap::*;
    }
    pub mod pause {
        pub use crate::pause::*;
    }
    pub mod recorder {
        pub use crate::recorder::*;
    }
    pub mod region {
        pub use crate::region::*;
    }
    pub mod ring {
        pub use crate::ring::*;
    }
    pub mod sched {
        pub use crate::sched::*;
    }
    pub mod tsc {
        pub use crate::tsc::*;
    }
}
