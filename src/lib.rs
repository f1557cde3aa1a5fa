//! latte: latency spans timed with the TSC, recorded into per-(thread, ID)
//! single-producer rings that other processes can read live.
//!
//! The data flow, one module per step:
//!
//! ```text
//!  latte_start ──► recorder::start   ID -> ring through the thread's cache (miss:
//!                    │                intern + slot allocation, under the registry
//!                    │                lock); push (ring, tsc, mode) on the span stack
//!  latte_stop  ──► recorder::stop    pop, duration, append the sample to the ring
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
//! `tsc` reads the counter, `intern` keeps the ID table, `calibrate`
//! measures frequency and overheads, `flush` writes the region to disk,
//! `fault` keeps a shrunk shared object from killing anyone, `ffi` is the C
//! ABI over all of it (and `include/latte_inline.h` the same hot path,
//! inlined into C and C++ callers).

pub mod calibrate;
pub mod error;
pub mod fault;
pub mod ffi;
pub mod flush;
pub mod intern;
pub mod layout;
pub mod liveness;
pub mod reader;
pub mod recorder;
pub mod region;
pub mod report;
pub mod sched;
pub mod stats;
pub mod trace;
pub mod tsc;
