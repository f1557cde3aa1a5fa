//! Recording: Start pushes onto the calling thread's span stack, Stop pops
//! the innermost span and appends a sample to the thread's ring for that ID.
//!
//! One module, one file per concern. The files call one another (the hot
//! path falls to the slow paths and a slow Stop finishes on the hot one;
//! the registry installs the fork handlers that take its lock): the
//! layering of `docs/design.md` is between modules, and the recorder is one
//! layer.
//!
//! | file | what it holds |
//! |---|---|
//! | `hot.rs` | Start, Stop and pulse: the path `include/latte_inline.h` mirrors, and the span stack protocol |
//! | `cache.rs` | the hot state's ID cache (probe, insert, clear) |
//! | `slow.rs` | cache misses and counted refusals; prefault; installing a region; interning |
//! | `thread.rs` | the calling thread's hot and cold states, attach and exit |
//! | `registry.rs` | process-wide state under the lock: region, interner, state pools, slot allocation |
//! | `env.rs` | the shared region `LATTE_REGION` names, made in place of the private one |
//! | `ptr_map.rs` | the thread-private pointer map behind the cache |
//! | `lock.rs` | the registry's lock |
//! | `fork.rs` | the fork handlers |
//! | `calring.rs` | the calibration's own ring, outside the region |
//! | `counters.rs` | per-thread and per-process counters |

mod cache;
pub mod calring;
mod counters;
mod env;
mod fork;
mod hot;
mod lock;
mod ptr_map;
mod registry;
mod slow;
mod thread;

pub use counters::*;
pub use hot::*;
pub use registry::{region_if_any, unrecordable, REGISTRY};
pub use slow::*;
pub use thread::{activate, current, note_unavailable};
