//! The memory layout contract: every `#[repr(C)]` type that is shared between
//! the recording threads, the in-process reader, out-of-process readers (C or
//! Rust) and the inline fast path of `include/latte_inline.h`.
//!
//! A region is a header followed by chunks, each at a page-aligned offset
//! the header's directories give (in a shared-memory object or a flushed
//! image, its offset in the file). The region grows by chunks while the
//! program runs: a chunk is made (a name chunk's memory reserved whole, a
//! slot chunk's left to its rings, which commit theirs as they are
//! written: `latte_slot_header::write_limit`), then its offset is published
//! in the directory with release, then `total_size` grows past it
//! (release). Chunk `k` of a kind holds twice
//! what chunk `k - 1` holds, so `LATTE_CHUNKS` entries per kind outlast any
//! memory.
//!
//! ```text
//! offset 0              latte_region_header   (LATTE_HEADER_SIZE bytes)
//! slot_chunks[k]        slots first_slots*(2^k - 1) .. first_slots*(2^(k+1) - 1), each slot_stride bytes:
//!                         latte_slot_header   (128 bytes: write_idx alone on line 0,
//!                                              metadata on line 1)
//!                         latte_sample[samples_per_slot]  (16 bytes each)
//! name_chunks[k]        LATTE_FIRST_NAME_BYTES << k bytes of name records, token order:
//!                         u32 length + 1 (0: no more records in this chunk), the bytes,
//!                         padded to LATTE_NAME_ALIGN
//! ```
//!
//! Fields that change while readers may look are atomics (emitted as plain
//! integers in C; C code must access them with `__atomic` builtins). Every
//! other header field is written once before the region is published.

use core::ffi::c_char;
use core::sync::atomic::{AtomicU32, AtomicU64};

/// Magic bytes at offset 0 of every region and flushed image.
pub const LATTE_MAGIC: [u8; 8] = *b"LATTEREG";
/// Layout version; a reader refuses any other.
pub const LATTE_LAYOUT_VERSION: u32 = 5;
/// Generation of the in-process layout the inline path shares with Rust
/// (`latte_thread`, `latte_pulse_site`, `latte_cache_entry`). The slow
/// paths `include/latte_inline.h` calls end in `_v` and this number, so
/// that a program inlined against a header of another generation fails to
/// link rather than reading the thread state at the wrong offsets: change
/// both with the layout (a test checks that they agree).
pub const LATTE_THREAD_LAYOUT: u32 = 3;
/// Size of the region header in bytes.
pub const LATTE_HEADER_SIZE: u32 = 1024;
/// Size of a slot header in bytes (two cache lines).
pub const LATTE_SLOT_HEADER_SIZE: u32 = 128;
/// Size of one sample in bytes.
pub const LATTE_SAMPLE_SIZE: u32 = 16;
/// Timed modes: `LATTE_MODE_FAST`, `LATTE_MODE_MID`, `LATTE_MODE_HARD`.
pub const LATTE_TIMED_MODES: u32 = 3;
/// (start mode, stop mode) pairs of the timed modes: the calibration
/// measures each (`overhead_bits`, indexed by
/// `start * LATTE_TIMED_MODES + stop`).
pub const LATTE_MODE_PAIRS: u32 = LATTE_TIMED_MODES * LATTE_TIMED_MODES;
/// Overheads a calibration publishes: one per mode pair, then the pulse's
/// (at index `LATTE_MODE_PAIRS`).
pub const LATTE_OVERHEADS: u32 = LATTE_MODE_PAIRS + 1;
/// Open spans per thread; a Start beyond this is ignored and counted.
pub const LATTE_MAX_DEPTH: u32 = 64;
/// Entries of each chunk directory in the region header (`slot_chunks`,
/// `name_chunks`): chunk `k` holds twice what chunk `k - 1` holds, so 32
/// doublings of the first chunk outlast any machine's memory.
pub const LATTE_CHUNKS: u32 = 32;
/// Bytes of a region's first chunk of ID names; chunk `k` has `<< k`.
pub const LATTE_FIRST_NAME_BYTES: u32 = 65536;
/// Longest ID name stored whole, in bytes; a longer one is stored as its
/// first bytes, `~` and 16 hex digits of a 64-bit hash of the whole text
/// (`name`).
pub const LATTE_MAX_NAME_LEN: u32 = 4096;
/// Alignment of a name record (its length word, then its bytes).
pub const LATTE_NAME_ALIGN: u32 = 4;
/// Size of a name record's length word.
pub const LATTE_NAME_LEN_SIZE: u32 = 4;
/// Entries of a thread's `next_idx`: a ring's tag (its ID token modulo
/// this) picks one; rings whose tags collide share it, which costs the
/// prediction, never correctness (ring protocol W1).
pub const LATTE_RING_TAGS: u32 = 256;
/// Slots of the default, process-private region's first chunk (256 MiB of
/// address space with the default rings; memory is committed only as
/// samples are written).
pub const LATTE_DEFAULT_PRIVATE_SLOTS: u32 = 256;
/// Slots of a shared region's first chunk by default (16 rings of 1 MiB:
/// a fresh region fits a 64 MiB `/dev/shm`).
pub const LATTE_DEFAULT_FIRST_SLOTS: u32 = 16;
/// Samples kept per (thread, ID) ring by default (a power of two).
pub const LATTE_DEFAULT_SAMPLES: u32 = 65536;
/// A ring's growth step, in samples: its memory is first committed for
/// this many when its slot is first handed out, and its committed end
/// (`latte_slot_header::write_limit`) doubles from there, a multiple of
/// it. A power of two.
pub const LATTE_RING_STEP: u32 = 256;
/// `latte_slot_header::write_limit` of a ring whose memory is committed
/// whole: no index reaches it, and the ring laps at `samples_per_slot`.
pub const LATTE_RING_WHOLE: u64 = u64::MAX;
/// Entries of the per-thread pointer-keyed ID cache (a power of two): a
/// thread with up to 512 ID pointers keeps them all in it; past them the
/// cache is emptied and refilled, and each miss costs the thread's second
/// level (`recorder::ptr_map`).
pub const LATTE_CACHE_SIZE: u32 = 1024;
/// The cache's hash: an ID pointer's home entry is
/// `(ptr * LATTE_CACHE_HASH) >> LATTE_CACHE_SHIFT`.
pub const LATTE_CACHE_HASH: u64 = 0x9E37_79B9_7F4A_7C15;
/// 64 - log2(LATTE_CACHE_SIZE).
pub const LATTE_CACHE_SHIFT: u32 = 54;
/// The cache is emptied before an insert would fill more than this many entries.
pub const LATTE_CACHE_MAX_USED: u32 = LATTE_CACHE_SIZE / 2;
/// log2(LATTE_SAMPLE_SIZE): a sample's offset in its ring is `(idx & mask) << LATTE_SAMPLE_SHIFT`.
pub const LATTE_SAMPLE_SHIFT: u32 = 4;
/// Token returned when an ID cannot be interned.
pub const LATTE_INVALID_ID: u32 = 0xFFFF_FFFF;
/// Largest duration a sample can hold (48 bits of cycles); longer spans saturate.
pub const LATTE_MAX_DURATION: u64 = (1u64 << 48) - 1;

/// Timer mode of a Start or a Stop. Any value other than MID and HARD behaves,
/// and is recorded, as FAST.
#[allow(non_camel_case_types)]
pub type latte_mode = u32;
/// `rdtsc`.
pub const LATTE_MODE_FAST: latte_mode = 0;
/// `rdtscp`.
pub const LATTE_MODE_MID: latte_mode = 1;
/// `lfence; rdtscp` at start, `rdtscp; lfence` at stop.
pub const LATTE_MODE_HARD: latte_mode = 2;
/// Mode code stored for both halves of a pulse sample.
pub const LATTE_MODE_PULSE: latte_mode = 3;

/// Display unit of a report or a flush.
#[allow(non_camel_case_types)]
pub type latte_unit = u32;
/// Cycles.
pub const LATTE_UNIT_CYCLE: latte_unit = 0;
/// Nanoseconds (via the measured cycles per ns).
pub const LATTE_UNIT_TIME: latte_unit = 1;

/// Whether a report subtracts the calibrated overhead.
#[allow(non_camel_case_types)]
pub type latte_data = u32;
/// Samples as recorded.
pub const LATTE_DATA_RAW: latte_data = 0;
/// Samples minus the measured overhead of their (start, stop) mode pair.
pub const LATTE_DATA_CALIBRATED: latte_data = 1;

/// Region flag: the region lives in a POSIX shared-memory object.
pub const LATTE_REGION_SHARED: u32 = 1;
/// Region flag: this is a flushed image on disk, not a live region.
pub const LATTE_REGION_FLUSHED: u32 = 2;
/// Region flag: a thread of the producer turned switch tracking on
/// (`latte_sched_enable`, or `LATTE_SCHED=1` when it first recorded an ID;
/// docs/sched.md), so samples may carry `LATTE_SAMPLE_SWITCHED`. Without
/// it nothing was tracked: a switched count of 0 means "not tracked", not
/// "never switched". Set by the producer after creation, with an atomic OR
/// (readers load `flags` atomically).
pub const LATTE_REGION_SWITCHES_TRACKED: u32 = 4;

/// `calibration_state`: no calibration published (none ran, or the last
/// run failed; `latte_calibration_run` may start one).
pub const LATTE_CALIBRATION_NONE: u32 = 0;
/// `calibration_state`: a thread of the producer is running the calibration.
pub const LATTE_CALIBRATION_RUNNING: u32 = 1;
/// `calibration_state`: the overheads are published (stored with release
/// after them).
pub const LATTE_CALIBRATION_DONE: u32 = 2;

/// Slot state: owned by a live thread.
pub const LATTE_SLOT_LIVE: u32 = 1;
/// Slot state: its thread has exited; every sample in it is final.
pub const LATTE_SLOT_CLOSED: u32 = 2;

/// `latte_poll_flush`: nothing pending (the last flush finished, or none was started).
pub const LATTE_FLUSH_IDLE: i32 = 0;
/// `latte_poll_flush`: a flush is in flight.
pub const LATTE_FLUSH_PENDING: i32 = 1;

/// One recorded span: 16 bytes.
///
/// `packed` holds, from bit 0: the duration in cycles (48 bits, saturating),
/// the depth (6 bits: spans still open around it, outermost 0), the start
/// mode (2 bits), the stop mode (2 bits) and `LATTE_SAMPLE_SWITCHED` (bit
/// 58). Pulses store mode 3 in both. Bits 59..63 are 0.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct latte_sample {
    /// TSC at the start of the span.
    pub start_tsc: AtomicU64,
    /// Duration, depth and mode pair, see `latte_sample_pack`.
    pub packed: AtomicU64,
}

/// Header of one (thread, ID) ring. Line 0 holds only `write_idx`, written
/// by the owning thread after every sample; line 1 holds metadata written
/// when the slot is assigned. The samples follow at offset 128.
#[repr(C, align(64))]
#[allow(non_camel_case_types)]
pub struct latte_slot_header {
    /// Number of samples ever written to this ring (the next index). Stored
    /// with release ordering after the sample it publishes.
    pub write_idx: AtomicU64,
    /// Only in a flushed image: `write_idx` read again after the samples
    /// were written out (the live reader's second load); and in a fork
    /// child's private copy of a shared region: the parent's `write_idx`
    /// read after the copy (samples it may have overwritten meanwhile are
    /// counted lost). Never written in a live region, so `write_idx` has
    /// its line to itself there; a live reader takes the larger of the two
    /// as its second load.
    pub flushed_end_idx: AtomicU64,
    /// The index the ring's committed memory ends at, a multiple of
    /// `LATTE_RING_STEP`: a write at an index at or past it first commits
    /// more (the ring grows, doubling, up to `samples_per_slot`) or, when
    /// no more can be had, laps early (ring protocol, G1-G3).
    /// `LATTE_RING_WHOLE` once the whole ring is committed. Stored by the owner thread only (relaxed: it is its
    /// only reader that acts on it), after the memory is committed; kept
    /// when the slot is handed to a new owner.
    pub write_limit: AtomicU64,
    pub _pad0: [u64; 5],
    /// 0 while unassigned or being reassigned; otherwise changes every time
    /// the slot is given to a new (thread, ID) pair. Stored with release.
    pub generation: AtomicU32,
    /// Interned token of the ID recorded here.
    pub id_token: AtomicU32,
    /// Process-wide index of the recording thread (0, 1, ... in order of
    /// first recording).
    pub thread_idx: AtomicU32,
    /// OS thread id (gettid) of the recording thread.
    pub os_tid: AtomicU32,
    /// LATTE_SLOT_LIVE or LATTE_SLOT_CLOSED (release on close).
    pub state: AtomicU32,
    pub _pad_state: u32,
    /// Samples written to this slot by its earlier owners (every earlier
    /// generation's final `write_idx`, summed): the slot's samples since it
    /// was made are `gen_base + write_idx`. Stored at assignment (A3).
    pub gen_base: AtomicU64,
    pub _pad1: [u32; 8],
}

impl latte_slot_header {
    /// The header of a ring that is never read and whose memory is whole
    /// (a sink: `write_limit` is `LATTE_RING_WHOLE`); everything else 0.
    pub const fn sink() -> latte_slot_header {
        latte_slot_header {
            write_idx: AtomicU64::new(0),
            flushed_end_idx: AtomicU64::new(0),
            write_limit: AtomicU64::new(LATTE_RING_WHOLE),
            _pad0: [0; 5],
            generation: AtomicU32::new(0),
            id_token: AtomicU32::new(0),
            thread_idx: AtomicU32::new(0),
            os_tid: AtomicU32::new(0),
            state: AtomicU32::new(0),
            _pad_state: 0,
            gen_base: AtomicU64::new(0),
            _pad1: [0; 8],
        }
    }
}

/// The directory header at offset 0 of a region.
///
/// Geometry fields are written once before the region is published; the
/// directories, `total_size`, the counters and calibration fields are
/// atomics updated while readers look.
#[repr(C, align(64))]
#[allow(non_camel_case_types)]
pub struct latte_region_header {
    /// `LATTEREG`.
    pub magic: [u8; 8],
    /// LATTE_LAYOUT_VERSION.
    pub version: u32,
    /// Size of this header (LATTE_HEADER_SIZE).
    pub header_size: u32,
    /// Size of a slot header (LATTE_SLOT_HEADER_SIZE).
    pub slot_header_size: u32,
    /// Size of a sample (LATTE_SAMPLE_SIZE).
    pub sample_size: u32,
    /// Slots in slot chunk 0; chunk `k` holds `first_slots << k`.
    pub first_slots: u32,
    /// Samples per slot (a power of two).
    pub samples_per_slot: u32,
    /// Bytes of name chunk 0 (LATTE_FIRST_NAME_BYTES); chunk `k` has `<< k`.
    pub first_name_bytes: u32,
    /// Most IDs the producer takes (0: no limit); the rest are counted in
    /// `unfit_id_drops`.
    pub id_limit: u32,
    /// Bytes from one slot to the next within a chunk.
    pub slot_stride: u64,
    /// Bytes of the region in use: the end of its last published chunk
    /// (release, after the chunk's directory entry).
    pub total_size: AtomicU64,
    /// Process id of the producer: the process that made the region, or the
    /// fork child that moved its copy into a shared object (which changes
    /// it while the child's own threads may read it: an atomic).
    pub producer_pid: AtomicU32,
    /// LATTE_REGION_SHARED, LATTE_REGION_FLUSHED, and
    /// LATTE_REGION_SWITCHES_TRACKED, set while the producer runs.
    pub flags: AtomicU32,
    /// TSC read at region creation ("the program's first tsc").
    pub anchor_tsc: u64,
    /// CLOCK_REALTIME in ns read next to `anchor_tsc`.
    pub anchor_realtime_ns: u64,
    /// Number of published ID names (release after the name).
    pub ids_used: AtomicU32,
    /// High-water mark of slots handed out (release after the slot's metadata).
    pub slots_used: AtomicU32,
    /// Threads that ever recorded.
    pub threads_seen: AtomicU64,
    /// Cycles per ns as f64 bits; 0 until measured.
    pub cycles_per_ns_bits: AtomicU64,
    /// `LATTE_CALIBRATION_NONE`, `LATTE_CALIBRATION_RUNNING` or
    /// `LATTE_CALIBRATION_DONE`.
    pub calibration_state: AtomicU32,
    /// Preferred display unit (set by a flush).
    pub display_unit: AtomicU32,
    /// Overhead in cycles (f64 bits) of an empty span, [start mode][stop mode].
    pub overhead_bits: [AtomicU64; LATTE_MODE_PAIRS as usize],
    /// Overhead in cycles (f64 bits) of a pulse.
    pub pulse_overhead_bits: AtomicU64,
    /// Starts ignored because 64 spans were open.
    pub overflow_starts: AtomicU64,
    /// Stops ignored because nothing was open.
    pub orphan_stops: AtomicU64,
    /// Spans not recorded because their ID's name could not be stored (the
    /// memory for it could not be had, or the producer's `id_limit`).
    pub unfit_id_drops: AtomicU64,
    /// Spans not recorded because no slot could be had (the region could not
    /// grow: memory, address space or `/dev/shm` ran out).
    pub no_slot_drops: AtomicU64,
    /// Slots of exited threads given to new (thread, ID) pairs.
    pub slot_reuses: AtomicU64,
    /// Samples still in those slots when they were reused.
    pub reuse_discarded: AtomicU64,
    /// Spans recorded after the thread's recorder was torn down (from a
    /// pthread key destructor that runs after latte's, `src/recorder/exit.rs`),
    /// and spans still open then.
    pub late_drops: AtomicU64,
    /// CLOCK_MONOTONIC_RAW in ns read next to `anchor_tsc` (0 in images of
    /// producers that did not keep it). With a second (TSC, clock) pair it
    /// gives cycles per ns without a measurement window (src/calibrate.rs).
    pub anchor_monotonic_ns: u64,
    /// Offset of each slot chunk; 0 while it does not exist. Stored with
    /// release once the chunk is whole.
    pub slot_chunks: [AtomicU64; LATTE_CHUNKS as usize],
    /// Offset of each name chunk; 0 while it does not exist. Stored with
    /// release once the chunk is whole.
    pub name_chunks: [AtomicU64; LATTE_CHUNKS as usize],
    /// Which region of its name this is: 1 for one made under a free name,
    /// its predecessor's plus one for one that took over the name of a
    /// region whose producer was gone (`liveness`, L4); 0 when not known (a
    /// private region, or a predecessor that could not be read). Set before
    /// the region is published under its name.
    pub incarnation: AtomicU64,
    /// With `incarnation` above 1: the samples the region's predecessors
    /// under its name recorded in all, outside reserved IDs (the
    /// predecessor's `recorded_before` plus what its rings had recorded,
    /// `gen_base + write_idx` of each slot, when it was taken over). A
    /// reader that saw an earlier region of the name and then this one
    /// counts the difference as samples of regions it never saw.
    pub recorded_before: AtomicU64,
    /// Bytes of ring memory the region may commit (0 in an image of a
    /// producer without one): rings grow within it, and past it lap at the
    /// size they reached (`early_laps`); `u64::MAX`: no budget. Written
    /// once, before the region is published.
    pub budget_bytes: AtomicU64,
    /// Bytes of ring memory committed so far (slot headers and samples, in
    /// whole pages), at most `budget_bytes`.
    pub committed_bytes: AtomicU64,
    /// Laps rings made before reaching `samples_per_slot` because their
    /// memory could not grow (the budget was reached, or the memory or
    /// `/dev/shm` ran out): each started the ring over at index 0 as a new
    /// generation, and what it overwrote is lost to readers and counted
    /// there.
    pub early_laps: AtomicU64,
    pub _reserved: [u64; 27],
}

/// One entry of a thread's pointer-keyed cache: ID pointer -> its ring.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct latte_cache_entry {
    /// The ID pointer; `LATTE_CACHE_EMPTY` when unused.
    pub key: *const c_char,
    /// The ring this thread records that ID into, tagged with its token
    /// (`tag_ring`).
    pub ring: u64,
}

/// Key of an unused cache entry: NULL (a zero-initialised state is an empty
/// cache; NULL IDs are never cached).
pub const LATTE_CACHE_EMPTY: usize = 0;

/// The hot per-thread recorder state: the span stack and the ID cache,
/// laid out by Rust and read and written only by its own thread.
///
/// C and C++ callers of `latte_inline.h` keep one in their own thread-local
/// storage (zero-initialised; reached at a fixed offset from the thread
/// pointer, with no indirection) and pass its address to the slow paths,
/// which attach it to the thread on first use. Threads that only call the
/// library get one from Rust. A thread has one *active* state; a Start
/// through another (a second copy of the header's thread-local, say in a
/// library built with hidden visibility) moves the open spans over to it,
/// and leaves the old one with an empty cache and depth 0 so that its next
/// use goes through a slow path again.
///
/// The stack keeps the ring of the innermost open span in `top_ring`, at a
/// fixed place, so that Stop finds where to write without first loading the
/// depth (a dependent load the out-of-order core could not hide: measured,
/// it cost Start+Stop about 7 cycles). Each frame keeps one word
/// (`frame_word`): the `top_ring` of the span around it (a tagged ring: the
/// address in the low 48 bits, which a user-space address fits, `mmap`
/// refusing a mapping that does not; the ring's ID token in the top 8) and
/// the span's depth and start mode in bits 48..55, where the sample's
/// `packed` word has them. One word rather than two saved a store in Start
/// and a load in Stop: about 2.5 cycles a Start+Stop, measured.
///
/// Stop writes at the thread's own copy of the ring's `write_idx`
/// (`next_idx`, by token), compared with the ring's in the shadow of the
/// writes (ring protocol, W1): the sample's address then does not wait for
/// a load from the ring's header, which sits on a page of its own for each
/// ID. With many IDs per thread those pages outnumber the TLB, and the
/// load was the cost that grew with the number of IDs.
///
/// Cache-line aligned, so that the fields every call touches (depth, mask,
/// `top_ring`) share one line wherever the linker puts the thread-local.
#[repr(C, align(64))]
#[allow(non_camel_case_types)]
pub struct latte_thread {
    /// Number of open spans.
    pub depth: u32,
    /// Rust-private: 1 while this is the active state of its thread.
    pub attached: u32,
    /// `samples_per_slot - 1` of the region this thread records into
    /// (0 until attached).
    pub sample_mask: u64,
    /// Ring of the innermost open span, tagged with its token (`tag_ring`;
    /// stale when `depth` is 0).
    pub top_ring: u64,
    /// Where this thread's switch count lives: the `data_head` of its perf
    /// switch ring (`sched`), or a word that never changes when the thread is
    /// not tracked. Loaded only while `switch_base` is not 0. Set when the
    /// state is attached and when the thread's ring opens or closes; never
    /// NULL once attached.
    pub switch_head: *const AtomicU64,
    /// 0 while the thread is not tracked; otherwise a base the hot path adds
    /// to its switch count (`*switch_head`) to make its switch mark, set
    /// with `switch_head`: at least 1, and larger than every mark (count +
    /// base) the thread's earlier rings ever gave, so that a mark is never
    /// taken for one from another ring (`sched`). Start, Stop and a pulse
    /// branch on it being 0, so that an untracked thread loads no count.
    pub switch_base: u64,
    /// Rust-private: entries of `cache` in use.
    pub cache_used: u64,
    /// Pointer-keyed cache, open addressing with linear probing: an ID is
    /// looked up at `cache_index(id)`, then at each next entry (wrapping)
    /// until its key or an empty entry. At most half full
    /// (`LATTE_CACHE_MAX_USED`), so nearly every hit is at the first or
    /// second entry and every miss ends.
    pub cache: [latte_cache_entry; LATTE_CACHE_SIZE as usize],
    /// `frame_tsc[d]`: the TSC span `d` started at.
    pub frame_tsc: [u64; LATTE_MAX_DEPTH as usize],
    /// `frame_word[d]`: `top_ring` as it was when span `d` opened (its
    /// address in bits 0..47, its token in 56..63), and span `d`'s depth and
    /// start mode in bits 48..55 (`LATTE_FRAME_SPAN_MASK`), placed as in
    /// `latte_sample.packed` (see `frame_word`).
    pub frame_word: [u64; LATTE_MAX_DEPTH as usize],
    /// `frame_head[d]`: the switch mark when span `d` started: 0 when the
    /// thread was not tracked, else `*switch_head + switch_base`.
    pub frame_head: [u64; LATTE_MAX_DEPTH as usize],
    /// `next_idx[tag]`: the `write_idx` this thread expects its ring of that
    /// tag (`ring_tag`) to have (after its own last write there). Stop writes at
    /// it when the ring's own index agrees, and at the ring's otherwise
    /// (another state of this thread, a pulse or a signal handler wrote the
    /// ring meanwhile). Zero-initialised: a first write finds out.
    pub next_idx: [u64; LATTE_RING_TAGS as usize],
}

/// The bits of a tagged ring (and of a `frame_word`) that hold the ring's
/// address.
pub const LATTE_FRAME_RING_MASK: u64 = (1u64 << 48) - 1;
/// Bit position of the ring's ID token in a tagged ring.
pub const LATTE_RING_TOKEN_SHIFT: u32 = 56;
/// The bits of a `frame_word` that hold the span's depth and start mode
/// (the rest is the outer span's tagged ring).
pub const LATTE_FRAME_SPAN_MASK: u64 = ((1u64 << LATTE_RING_TOKEN_SHIFT) - 1) & !LATTE_FRAME_RING_MASK;
const _: () = assert!(LATTE_RING_TAGS == 1 << (64 - LATTE_RING_TOKEN_SHIFT), "a tag fills the bits above the span bits");
const _: () = assert!(LATTE_START_MODE_SHIFT + 2 == LATTE_RING_TOKEN_SHIFT, "depth and start mode end where the tag begins");

/// The tag of the ring of ID `token`: the entry of `latte_thread.next_idx`
/// it keeps its index in. Tokens that share a tag share the entry: the
/// prediction then fails more often, and W1 takes the ring's own index.
#[inline(always)]
pub fn ring_tag(token: u32) -> u64 {
    (token % LATTE_RING_TAGS) as u64
}

/// A ring's address tagged with its ID token's tag (`ring_tag`, which
/// indexes `latte_thread.next_idx`; a sink, which has none, carries 0).
#[inline(always)]
pub fn tag_ring(ring: *mut latte_slot_header, token: u32) -> u64 {
    debug_assert!(ring as u64 <= LATTE_FRAME_RING_MASK);
    ring as u64 | (ring_tag(token) << LATTE_RING_TOKEN_SHIFT)
}

/// The address of a tagged ring.
#[inline(always)]
pub fn ring_ptr(tagged: u64) -> *mut latte_slot_header {
    (tagged & LATTE_FRAME_RING_MASK) as *mut latte_slot_header
}

/// The token of a tagged ring.
#[inline(always)]
pub fn ring_token(tagged: u64) -> usize {
    (tagged >> LATTE_RING_TOKEN_SHIFT) as usize
}

/// The `packed` bits a span contributes at Start: its depth and start mode.
#[inline(always)]
pub fn span_bits(depth: u32, start_mode: u32) -> u64 {
    ((depth as u64 & LATTE_DEPTH_MASK) << LATTE_DEPTH_SHIFT) | ((start_mode as u64 & LATTE_MODE_MASK) << LATTE_START_MODE_SHIFT)
}

/// The frame word of a span opened at `depth` in `start_mode` inside the
/// span whose tagged ring is `outer`.
#[inline(always)]
pub fn frame_word(outer: u64, depth: u32, start_mode: u32) -> u64 {
    debug_assert!(outer & LATTE_FRAME_SPAN_MASK == 0);
    outer | span_bits(depth, start_mode)
}

/// The outer span's tagged ring kept in a frame word.
#[inline(always)]
pub fn frame_ring(word: u64) -> u64 {
    word & !LATTE_FRAME_SPAN_MASK
}

/// The `packed` bits (depth, start mode) kept in a frame word.
#[inline(always)]
pub fn frame_bits(word: u64) -> u64 {
    word & LATTE_FRAME_SPAN_MASK
}

/// The duration `stop - start` as a sample holds it: one that does not fit
/// 48 bits is made defined out of line (see `fix_duration`).
#[inline(always)]
pub fn duration(start: u64, stop: u64) -> u64 {
    let d = stop.wrapping_sub(start);
    if d > LATTE_MAX_DURATION {
        fix_duration(d)
    } else {
        d
    }
}

/// A duration that does not fit 48 bits: a negative one (the TSC went
/// backwards, e.g. across unsynchronised sockets) is 0, a longer one
/// saturates. Kept out of line of the hot path.
#[cold]
#[inline(never)]
pub fn fix_duration(raw: u64) -> u64 {
    if (raw as i64) < 0 {
        0
    } else {
        LATTE_MAX_DURATION
    }
}

/// The `packed` bits of a pulse taken with `depth` spans open.
#[inline(always)]
pub fn pulse_bits(depth: u32) -> u64 {
    span_bits(depth, LATTE_MODE_PULSE) | ((LATTE_MODE_PULSE as u64) << LATTE_STOP_MODE_SHIFT)
}

/// Per-call-site state of a pulse, kept by the caller: one per call site
/// and thread (a thread-local static), zero-initialised. Never share one
/// between threads.
///
/// Cache-line aligned, so that it never straddles two cache lines.
#[repr(C, align(64))]
#[allow(non_camel_case_types)]
pub struct latte_pulse_site {
    /// TSC of the previous pulse from this site on this thread; 0 = not primed.
    pub last_tsc: u64,
    /// The ID the ring below belongs to.
    pub id: *const c_char,
    /// This thread's ring for that ID (NULL until resolved).
    pub slot: *mut latte_slot_header,
    /// The ring's `write_idx` as this site left it. A pulse writes at this
    /// index when the ring's own index still equals it (nothing else wrote
    /// the ring since), which the core can check in the shadow of the
    /// writes instead of waiting for the load; otherwise at the ring's own.
    pub next_idx: u64,
    /// The thread's switch mark (`frame_head`) at this site's previous pulse
    /// that took it: 0 when the thread was untracked then, never 0 when it
    /// was tracked.
    pub last_head: u64,
}

impl Default for latte_pulse_site {
    fn default() -> Self {
        latte_pulse_site::new()
    }
}

impl latte_pulse_site {
    /// An unprimed site.
    pub const fn new() -> Self {
        latte_pulse_site { last_tsc: 0, id: core::ptr::null(), slot: core::ptr::null_mut(), next_idx: 0, last_head: 0 }
    }
}

/// Bit position of the depth in `latte_sample.packed`.
pub const LATTE_DEPTH_SHIFT: u32 = 48;
/// Bit position of the start mode in `latte_sample.packed`.
pub const LATTE_START_MODE_SHIFT: u32 = 54;
/// Bit position of the stop mode in `latte_sample.packed`.
pub const LATTE_STOP_MODE_SHIFT: u32 = 56;
/// The depth's bits of `latte_sample.packed`, shifted down by
/// `LATTE_DEPTH_SHIFT`: the bits below the start mode.
pub const LATTE_DEPTH_MASK: u64 = (1u64 << (LATTE_START_MODE_SHIFT - LATTE_DEPTH_SHIFT)) - 1;
/// A mode's bits of `latte_sample.packed`, shifted down by
/// `LATTE_START_MODE_SHIFT` or `LATTE_STOP_MODE_SHIFT`: the bits below the
/// next field.
pub const LATTE_MODE_MASK: u64 = (1u64 << (LATTE_STOP_MODE_SHIFT - LATTE_START_MODE_SHIFT)) - 1;
/// Bit position of `LATTE_SAMPLE_SWITCHED` in `latte_sample.packed`.
pub const LATTE_SAMPLE_SWITCHED_SHIFT: u32 = 58;
/// Set in a sample's `packed` word when its thread was switched out at
/// least once between the Start and the Stop (a pulse: since the previous
/// pulse of its call site). Only tracked threads (`latte_sched_enable`) ever
/// set it; a sample without it was not switched out, exactly, when its
/// thread was tracked.
pub const LATTE_SAMPLE_SWITCHED: u64 = 1u64 << LATTE_SAMPLE_SWITCHED_SHIFT;

/// Packs a sample's second word. `duration` saturates at 48 bits.
#[inline(always)]
pub fn pack(duration: u64, depth: u32, start_mode: u32, stop_mode: u32) -> u64 {
    let d = if duration > LATTE_MAX_DURATION { LATTE_MAX_DURATION } else { duration };
    d | span_bits(depth, start_mode) | ((stop_mode as u64 & LATTE_MODE_MASK) << LATTE_STOP_MODE_SHIFT)
}

/// A sample decoded from its two words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    pub start_tsc: u64,
    pub duration: u64,
    pub depth: u32,
    pub start_mode: u32,
    pub stop_mode: u32,
    /// `LATTE_SAMPLE_SWITCHED` was set.
    pub switched: bool,
}

impl Sample {
    /// Decodes the packed word.
    #[inline]
    pub fn unpack(start_tsc: u64, packed: u64) -> Sample {
        Sample {
            start_tsc,
            duration: packed & LATTE_MAX_DURATION,
            depth: ((packed >> LATTE_DEPTH_SHIFT) & LATTE_DEPTH_MASK) as u32,
            start_mode: ((packed >> LATTE_START_MODE_SHIFT) & LATTE_MODE_MASK) as u32,
            stop_mode: ((packed >> LATTE_STOP_MODE_SHIFT) & LATTE_MODE_MASK) as u32,
            switched: packed & LATTE_SAMPLE_SWITCHED != 0,
        }
    }

    /// The (start, stop) pair as an index: below [`LATTE_MODE_PAIRS`] for
    /// spans, [`LATTE_MODE_PAIRS`] for pulses (a span's stop mode past
    /// HARD, which no recorder writes, counts as HARD).
    pub fn pair_index(&self) -> usize {
        if self.start_mode == LATTE_MODE_PULSE {
            LATTE_MODE_PAIRS as usize
        } else {
            (self.start_mode.min(LATTE_MODE_HARD) * LATTE_TIMED_MODES + self.stop_mode.min(LATTE_MODE_HARD)) as usize
        }
    }
}

/// Home entry in the per-thread cache of an ID pointer (the C header
/// computes the same thing from the same constants).
#[inline(always)]
pub fn cache_index(id: *const c_char) -> usize {
    ((id as usize as u64).wrapping_mul(LATTE_CACHE_HASH) >> LATTE_CACHE_SHIFT) as usize
}

/// The entry after `i` in the cache's probe order.
#[inline(always)]
pub fn cache_next(i: usize) -> usize {
    (i + 1) & (LATTE_CACHE_SIZE as usize - 1)
}

/// Where consecutive slots start relative to each other within a page
/// ([`LATTE_PAGE_SIZE`]): a slot stride of a page or more is padded to this
/// remainder modulo the page size (33 cache lines: an odd number of lines,
/// about half a page). Without the pad, a stride is 128 bytes past a
/// multiple of 4 KiB, so the write indices and current sample lines of the
/// rings a thread writes round the same few 4 KiB offsets and L1 sets; with
/// it, Fast Start+Stop over N IDs on one thread, round-robin, cost 1.03 x
/// one ID at N = 8 (1.10 unpadded) and 1.21 x at N = 200 (1.28), measured
/// in one binary. The pad is never touched, so it costs address space, not
/// memory.
const SLOT_PAGE_OFFSET: u64 = 2112;

/// Geometry of a region: the sizes every chunk follows, from the first
/// chunk's slot count and the ring size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Slots of slot chunk 0; chunk `k` holds `first_slots << k`.
    pub first_slots: u32,
    pub samples_per_slot: u32,
    /// Bytes from one slot to the next within a chunk.
    pub slot_stride: u64,
}

/// Rounds `n` up to a whole number of pages.
pub fn page_round(n: u64) -> Option<u64> {
    Some(n.checked_add(LATTE_PAGE_SIZE - 1)? & !(LATTE_PAGE_SIZE - 1))
}

/// The page size the layout aligns chunks to.
pub const LATTE_PAGE_SIZE: u64 = 4096;

impl Geometry {
    /// The geometry for a first chunk of `first_slots` slots of
    /// `samples_per_slot` samples; None when they are not usable (zero, not
    /// a power of two, or a size that overflows).
    pub fn new(first_slots: u32, samples_per_slot: u32) -> Option<Geometry> {
        if first_slots == 0 || samples_per_slot < 2 || !samples_per_slot.is_power_of_two() {
            return None;
        }
        let ring_bytes = (LATTE_SLOT_HEADER_SIZE as u64).checked_add((samples_per_slot as u64).checked_mul(LATTE_SAMPLE_SIZE as u64)?)?;
        // Pad a stride of a page or more up to SLOT_PAGE_OFFSET modulo a page.
        let pad = if ring_bytes >= LATTE_PAGE_SIZE { (SLOT_PAGE_OFFSET + LATTE_PAGE_SIZE - ring_bytes % LATTE_PAGE_SIZE) % LATTE_PAGE_SIZE } else { 0 };
        let slot_stride = ring_bytes.checked_add(pad)?;
        let g = Geometry { first_slots, samples_per_slot, slot_stride };
        // Keep every chunk size representable as an isize and a mapping length.
        g.slot_chunk_bytes(0)?;
        Some(g)
    }

    /// Slots of slot chunk `k`.
    pub fn chunk_slots(&self, k: u32) -> u64 {
        (self.first_slots as u64) << k
    }

    /// Slots of chunks `0..k` together: the first slot of chunk `k`.
    pub fn slots_before(&self, k: u32) -> u64 {
        (self.first_slots as u64) * ((1u64 << k) - 1)
    }

    /// Bytes of slot chunk `k` (whole pages); None when it would not fit a
    /// mapping.
    pub fn slot_chunk_bytes(&self, k: u32) -> Option<u64> {
        if k >= LATTE_CHUNKS {
            return None;
        }
        let b = page_round(self.chunk_slots(k).checked_mul(self.slot_stride)?)?;
        (b <= (isize::MAX as u64) / 4).then_some(b)
    }

    /// The chunk of slot `i` and its place in it.
    pub fn slot_place(&self, i: u32) -> (u32, u64) {
        let q = i as u64 / self.first_slots as u64 + 1;
        let k = 63 - q.leading_zeros();
        (k, i as u64 - self.slots_before(k))
    }
}

/// Bytes of name chunk `k`.
pub fn name_chunk_bytes(k: u32) -> u64 {
    (LATTE_FIRST_NAME_BYTES as u64) << k
}

/// Bytes a name record of `len` name bytes takes (its length word, the
/// bytes, padding to LATTE_NAME_ALIGN).
pub const fn name_record_bytes(len: u64) -> u64 {
    (LATTE_NAME_LEN_SIZE as u64 + len).next_multiple_of(LATTE_NAME_ALIGN as u64)
}

const _: () = {
    assert!(LATTE_MODE_HARD + 1 == LATTE_TIMED_MODES && LATTE_MODE_FAST == 0);
    // The fields of `packed` in order, each wide enough for its values.
    assert!(LATTE_MAX_DURATION + 1 == 1u64 << LATTE_DEPTH_SHIFT);
    assert!(LATTE_DEPTH_MASK + 1 == LATTE_MAX_DEPTH as u64);
    assert!(LATTE_MODE_PULSE as u64 == LATTE_MODE_MASK);
    assert!(LATTE_STOP_MODE_SHIFT + (LATTE_STOP_MODE_SHIFT - LATTE_START_MODE_SHIFT) == LATTE_SAMPLE_SWITCHED_SHIFT);
    assert!(core::mem::size_of::<latte_sample>() == LATTE_SAMPLE_SIZE as usize);
    assert!(core::mem::size_of::<latte_slot_header>() == LATTE_SLOT_HEADER_SIZE as usize);
    assert!(core::mem::size_of::<latte_region_header>() == LATTE_HEADER_SIZE as usize);
    assert!(name_record_bytes(LATTE_MAX_NAME_LEN as u64) <= LATTE_FIRST_NAME_BYTES as u64);
    assert!((LATTE_FIRST_NAME_BYTES as u64).is_multiple_of(LATTE_PAGE_SIZE));
    assert!(core::mem::offset_of!(latte_slot_header, generation) == 64);
    assert!(core::mem::offset_of!(latte_slot_header, gen_base) == 88);
    // The C inline path relies on these (include/latte_inline.h).
    assert!(1u32 << LATTE_SAMPLE_SHIFT == LATTE_SAMPLE_SIZE);
    assert!(LATTE_CACHE_SIZE.is_power_of_two());
    assert!(LATTE_RING_STEP.is_power_of_two());
    assert!(1u64 << (64 - LATTE_CACHE_SHIFT) == LATTE_CACHE_SIZE as u64);
    assert!(LATTE_CACHE_MAX_USED < LATTE_CACHE_SIZE);
    assert!(LATTE_CACHE_EMPTY == 0);
    assert!(SLOT_PAGE_OFFSET.is_multiple_of(64) && SLOT_PAGE_OFFSET < LATTE_PAGE_SIZE);
};

/// Adds `n` to a counter of the region header. Relaxed: counters are
/// statistics with no ordering relation to other data.
#[inline]
pub fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, core::sync::atomic::Ordering::Relaxed);
}

/// Reads an f64 stored as bits in an atomic of the region header.
pub fn load_f64(a: &AtomicU64) -> f64 {
    // Acquire pairs with the release in store_f64 (calibration published after its inputs).
    f64::from_bits(a.load(core::sync::atomic::Ordering::Acquire))
}

/// Stores an f64 as bits in an atomic of the region header.
pub fn store_f64(a: &AtomicU64, v: f64) {
    // Release: pairs with the acquire in load_f64.
    a.store(v.to_bits(), core::sync::atomic::Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_roundtrip_and_saturation() {
        let p = pack(12345, 7, LATTE_MODE_MID, LATTE_MODE_HARD);
        let s = Sample::unpack(99, p);
        assert_eq!((s.duration, s.depth, s.start_mode, s.stop_mode), (12345, 7, 1, 2));
        assert_eq!(s.pair_index(), 5);
        let big = Sample::unpack(0, pack(u64::MAX, 63, 3, 3));
        assert_eq!(big.duration, LATTE_MAX_DURATION);
        assert_eq!(big.depth, 63);
        assert_eq!(big.pair_index(), 9);
    }

    #[test]
    fn geometry_rejects_bad_capacities_and_places_slots() {
        assert!(Geometry::new(16, 65536).is_some());
        assert!(Geometry::new(0, 65536).is_none());
        assert!(Geometry::new(16, 1000).is_none());
        assert!(Geometry::new(u32::MAX, 1 << 31).is_none());
        let g = Geometry::new(2, 1024).unwrap();
        assert_eq!(g.slot_stride % LATTE_PAGE_SIZE, SLOT_PAGE_OFFSET);
        assert!(g.slot_stride >= 128 + 1024 * 16 && g.slot_stride < 128 + 1024 * 16 + LATTE_PAGE_SIZE);
        assert_eq!(g.slot_chunk_bytes(0).unwrap() % LATTE_PAGE_SIZE, 0);
        let small = Geometry::new(2, 64).unwrap();
        assert_eq!(small.slot_stride, 128 + 64 * 16, "below a page: not padded");
        // Chunks 0, 1, 2 of 3 first slots: 3, 6, 12 slots.
        let g = Geometry::new(3, 64).unwrap();
        let places: Vec<(u32, u64)> = [0, 2, 3, 8, 9, 20, 21].iter().map(|&i| g.slot_place(i)).collect();
        assert_eq!(places, vec![(0, 0), (0, 2), (1, 0), (1, 5), (2, 0), (2, 11), (3, 0)]);
        assert!(g.slot_chunk_bytes(LATTE_CHUNKS).is_none());
    }
}
