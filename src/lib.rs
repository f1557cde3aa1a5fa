//! latte: latency spans timed with the TSC, recorded into per-(thread, ID)
//! single-producer rings that other processes can read live.
//!
//! The data flow, one module per step:
//!
//! ```text
//!  latte_start ──► recorder::start   push (id, tsc, mode) on the thread's span stack
//!  latte_stop  ──► recorder::stop    pop, duration, cache lookup of the ID's ring
//!                    │ miss: intern (ID table) + slot allocation, under the registry lock
//!                    ▼
//!               region / layout      slot ring: 16-byte samples, write_idx (release)
//!                    ▼
//!               reader               validated view, perf-style read with cursors
//!                    ▼
//!               stats                outlier rule, mean/median/std dev/skew/percentiles
//!                    ▼
//!               report / trace       the table of DumpToStream, the Chrome trace
//! ```
//!
//! `tsc` reads the counter, `calibrate` measures frequency and overheads,
//! `flush` writes the region to disk, `ffi` is the C ABI over all of it.

pub mod calibrate;
pub mod error;
pub mod ffi;
pub mod flush;
pub mod intern;
pub mod layout;
pub mod reader;
pub mod recorder;
pub mod region;
pub mod report;
pub mod stats;
pub mod trace;
pub mod tsc;
