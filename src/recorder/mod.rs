//! Recording: Start pushes onto the calling thread's span stack, Stop pops
//! the innermost span and appends a sample to the thread's ring for that ID.
//!
//! One module, one file per concern, and one layer of `docs/design.md`.
//! Within it the files call downwards (`hot` falls to `slow` on a cache
//! miss; `slow` and `thread` use the `registry`; `cache`, `lock` and
//! `ptr_map` call nothing of the recorder), with one circle, on purpose:
//! the registry installs the fork handlers (`fork`) when it installs a
//! region, and those handlers are the registry lock's other holder, taking
//! it in prepare and giving it up in parent or child, so they work on the
//! registry's data directly.
//!
//! | file | what it holds |
//! |---|---|
//! | `hot.rs` | Start, Stop and pulse: the path `include/latte_inline.h` mirrors, the span stack protocol, and the inline path's slow Stop and pulse |
//! | `cache.rs` | the hot state's ID cache (probe, insert, clear) |
//! | `slow.rs` | cache misses and counted refusals; prefault; installing a region; interning |
//! | `thread.rs` | the calling thread's hot and cold states: attach, detach and retire |
//! | `exit.rs` | when a thread's states are retired: a pthread key's destructor, after the thread-local destructors |
//! | `registry.rs` | process-wide state under the lock: region, interner, state pools, slot allocation |
//! | `lineage.rs` | what a shared region keeps of the stale one whose name it takes over |
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
mod exit;
mod fork;
mod hot;
mod lineage;
mod lock;
mod ptr_map;
mod registry;
mod ring_write;
mod slow;
mod thread;

pub use cache::cache_promote;
pub use counters::*;
pub use hot::*;
pub use registry::{no_region, region_if_any, unrecordable, REGISTRY};
pub use ring_write::write_at_limit;
pub use slow::*;
pub use thread::{activate, current, note_refused_start, note_unavailable, take_refused_start};
