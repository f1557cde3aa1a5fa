//! Shrunk shared objects: a SIGBUS on one of latte's mappings becomes a lost
//! page, not a dead process.
//!
//! A POSIX shared-memory object can be truncated by any process allowed to
//! write it (a name collision with another program, a mistaken `truncate`).
//! Touching a mapped page past the new end raises SIGBUS, which would kill
//! the measured service on its next Stop, or a sidecar on its next read.
//! latte registers each shared mapping it makes (the producer's region, a
//! reader's view) here, and installs one SIGBUS handler, the first time a
//! mapping is registered. On a fault inside a registered mapping the handler
//! maps an anonymous zero page over the faulting page (same protection) and
//! returns, so the instruction runs again on that page: a producer's writes
//! then go nowhere (counted in `faults`), a reader reads zeros, which its
//! validation rejects. Any other SIGBUS goes to the handler installed before
//! ours, or, if that was the default, kills the process as it would have.
//! When the library is unloaded (`dlclose`) or the process exits, the
//! action from before ours is put back (a finaliser in `.fini_array`); the
//! chaining is `sigchain`'s.
//!
//! The table has no fixed size: it is a chain of fixed-size chunks. The
//! first chunk is static; when every entry is in use, `register` allocates
//! another (outside the handler, which never allocates) and appends it to
//! the chain with a compare-and-swap on the last chunk's `next`. Chunks are
//! never freed; an entry freed by `unregister` is reused by the next
//! `register`. The handler only walks the chain with atomic loads: it
//! touches nothing but atomics in chunks that live as long as the process,
//! and calls only `mmap` and `sigaction`, both plain system calls.

use crate::mmap::PAGE;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// Entries per chunk of the table.
const CHUNK_ENTRIES: usize = 64;

struct Entry {
    /// Start of the mapping; 0 = free entry.
    base: AtomicUsize,
    len: AtomicUsize,
    writable: AtomicBool,
    /// Pages of this mapping replaced so far.
    faults: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Entry = Entry { base: AtomicUsize::new(0), len: AtomicUsize::new(0), writable: AtomicBool::new(false), faults: AtomicU64::new(0) };

/// One link of the table's chain.
struct Chunk {
    entries: [Entry; CHUNK_ENTRIES],
    /// The next chunk, or null for the last; set once (null to a chunk that
    /// lives for the rest of the process), never cleared.
    next: AtomicPtr<Chunk>,
}

impl Chunk {
    const fn new() -> Chunk {
        Chunk { entries: [FREE; CHUNK_ENTRIES], next: AtomicPtr::new(core::ptr::null_mut()) }
    }
}

/// The first chunk of the table; the others hang off its `next`.
static TABLE: Chunk = Chunk::new();

/// Every entry of the table, chunk by chunk, in chain order. Safe in the
/// handler: atomic loads only, of chunks never freed.
fn entries() -> impl Iterator<Item = &'static Entry> {
    let mut chunk: Option<&'static Chunk> = Some(&TABLE);
    core::iter::from_fn(move || {
        let c = chunk?;
        // Acquire: pairs with the release CAS in `grow`, so the new chunk's
        // (free) entries are initialised for whoever sees its address.
        let next = c.next.load(Ordering::Acquire);
        // SAFETY: a non-null `next` points to a chunk leaked by `grow`,
        // never freed or moved.
        chunk = if next.is_null() { None } else { Some(unsafe { &*next }) };
        Some(c.entries.iter())
    })
    .flatten()
}

/// Appends a chunk of free entries to the chain (or finds that another
/// thread did meanwhile). False when no memory is left for one.
fn grow() -> bool {
    let mut last: &'static Chunk = &TABLE;
    loop {
        // Acquire: as in `entries`.
        let next = last.next.load(Ordering::Acquire);
        if next.is_null() {
            break;
        }
        // SAFETY: as in `entries`.
        last = unsafe { &*next };
    }
    let layout = std::alloc::Layout::new::<Chunk>();
    // SAFETY: Chunk has a nonzero size.
    let fresh = unsafe { std::alloc::alloc(layout) } as *mut Chunk;
    if fresh.is_null() {
        return false;
    }
    // SAFETY: fresh is valid for writes of one Chunk, and aligned for it.
    unsafe { fresh.write(Chunk::new()) };
    // Release: the chunk's initialisation is visible to whoever loads its
    // address with acquire. On failure another thread appended a chunk
    // first: free ours (never published) and let the caller look again.
    if last.next.compare_exchange(core::ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire).is_err() {
        // SAFETY: allocated above with this layout, never shared.
        unsafe { std::alloc::dealloc(fresh as *mut u8, layout) };
    }
    true
}

/// Pages replaced after a fault, since the process started.
static FAULTS: AtomicU64 = AtomicU64::new(0);

/// Our SIGBUS handler and the action from before it.
static CHAIN: crate::sigchain::Chain = crate::sigchain::Chain::new(libc::SIGBUS);

/// Entries of the table in use: the mappings protected now. For the tests,
/// which check that failing calls leave none behind.
#[cfg(feature = "internals")]
pub fn registered() -> usize {
    // Acquire: pairs with the release stores of `register`/`unregister`.
    entries().filter(|e| e.base.load(Ordering::Acquire) != 0).count()
}

/// Chunks in the table's chain, for the tests, which check that freed
/// entries are reused before the table grows.
#[cfg(feature = "internals")]
pub fn chunks() -> usize {
    entries().count() / CHUNK_ENTRIES
}

/// Pages replaced after a SIGBUS in a latte mapping, process-wide.
pub fn faults() -> u64 {
    // Relaxed: a statistic.
    FAULTS.load(Ordering::Relaxed)
}

/// Protects `[base, base + len)` (a shared mapping of ours) until
/// `unregister`, in a free entry of the table, which grows by a chunk when
/// none is free. Returns false only when no memory is left for a chunk:
/// the caller must not use the mapping then, since a shrunk object would
/// kill the process through it.
fn register(base: *mut u8, len: usize, writable: bool) -> bool {
    install();
    loop {
        for e in entries() {
            // The CAS claims the entry; the length, stored last with
            // release, is what makes it live: the handler ignores entries
            // whose length it sees as 0, and once it sees the length
            // (acquire) it also sees the protection stored before it.
            if e.base.compare_exchange(0, base as usize, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                e.writable.store(writable, Ordering::Release);
                e.faults.store(0, Ordering::Release);
                e.len.store(len, Ordering::Release);
                return true;
            }
        }
        if !grow() {
            return false;
        }
    }
}

/// Pages of the registered mapping at `base` replaced after faults: nonzero
/// means the object shrank under it and some of it now reads as zeros.
pub fn faults_at(base: *const u8) -> u64 {
    // No page replaced anywhere yet (the usual case): no walk over the
    // table, whose length grows with the mappings held. Acquire: pairs with
    // the handler's release increment, made after the entry's.
    if FAULTS.load(Ordering::Acquire) == 0 {
        return 0;
    }
    for e in entries() {
        if e.base.load(Ordering::Acquire) == base as usize {
            // Acquire: pairs with the handler's release increment.
            return e.faults.load(Ordering::Acquire);
        }
    }
    0
}

/// Stops protecting the mapping at `base` (before it is unmapped).
fn unregister(base: *mut u8) {
    for e in entries() {
        if e.base.load(Ordering::Acquire) == base as usize {
            // Release: the length is cleared before the entry is freed.
            e.len.store(0, Ordering::Release);
            e.base.store(0, Ordering::Release);
            return;
        }
    }
}

/// A mapping protected by the handler until this value is dropped (drop it
/// before the mapping is unmapped: declare it before the `Mmap` in a struct).
#[derive(Debug)]
pub struct Protected {
    base: *mut u8,
}

// SAFETY: only the address is kept, as a key into the process-wide table.
unsafe impl Send for Protected {}
// SAFETY: as Send.
unsafe impl Sync for Protected {}

/// Registers `map` (a shared mapping of an object that may shrink); no
/// memory for the table to grow: `ENOMEM`, and the caller must not use the
/// mapping.
pub fn protect(map: &crate::mmap::Mmap, writable: bool) -> Result<Protected, crate::error::Error> {
    protect_range(map.as_ptr(), map.size(), writable)
}

/// `protect` for the mapping at `base`, `len` bytes long, that its caller
/// owns and keeps mapped while the `Protected` lives (a region's mapping
/// about to become shared where it stands, `region::share`).
pub fn protect_range(base: *mut u8, len: usize, writable: bool) -> Result<Protected, crate::error::Error> {
    if register(base, len, writable) {
        Ok(Protected { base })
    } else {
        Err(crate::error::Error::Os(libc::ENOMEM))
    }
}

impl Drop for Protected {
    fn drop(&mut self) {
        unregister(self.base);
    }
}

/// Installs the handler (once); `register` does it too.
pub fn install() {
    CHAIN.install(on_sigbus);
}

/// Finds the registered mapping holding `addr`.
fn lookup(addr: usize) -> Option<&'static Entry> {
    for e in entries() {
        // Acquire: pairs with the release stores in `register`.
        let base = e.base.load(Ordering::Acquire);
        let len = e.len.load(Ordering::Acquire);
        if base != 0 && len != 0 && addr >= base && addr - base < len {
            return Some(e);
        }
    }
    None
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    // si_code > 0: raised by a fault (not sent by kill), so si_addr is the address.
    if let Some(e) = if code > 0 { lookup(addr) } else { None } {
        let page = addr & !(PAGE - 1);
        let prot = if e.writable.load(Ordering::Acquire) { libc::PROT_READ | libc::PROT_WRITE } else { libc::PROT_READ };
        // SAFETY: replaces one page inside a mapping latte made and still
        // owns (it is registered) with anonymous memory; nothing else lives there.
        let p = unsafe { libc::mmap(page as *mut libc::c_void, PAGE, prot, libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
        if p != libc::MAP_FAILED {
            // Release: a reader that sees the count (acquire) knows its data may be zeros.
            e.faults.fetch_add(1, Ordering::Release);
            // Release, after the entry's: see `faults_at`.
            FAULTS.fetch_add(1, Ordering::Release);
            return; // the faulting instruction runs again, on the new page
        }
    }
    // Not ours (or no memory for a page): the previous disposition decides.
    CHAIN.forward(sig, info, ctx);
}

/// Puts the SIGBUS action from before ours back, if ours is the one
/// installed. Runs when the library is unloaded (`dlclose`) or the process
/// exits.
extern "C" fn restore_previous_on_unload() {
    CHAIN.restore(on_sigbus);
}

/// `restore_previous_on_unload` as a finaliser of this shared object.
#[used]
#[link_section = ".fini_array"]
static RESTORE_ON_UNLOAD: extern "C" fn() = restore_previous_on_unload;
