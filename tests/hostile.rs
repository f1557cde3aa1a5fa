//! Hostile and corrupt region objects: each gives an error code, never a
//! crash, an out-of-bounds read or a hang. Images are placed right before a
//! PROT_NONE guard page, so a read past the end would fault the test.

use latte::error::*;
use latte::layout::*;
use latte::reader::{latte_cursor, Mapping, View};
use proptest::prelude::*;
use std::sync::OnceLock;

/// A valid image: this process's own shared region after some recording.
fn image() -> &'static Vec<u8> {
    static IMG: OnceLock<Vec<u8>> = OnceLock::new();
    IMG.get_or_init(|| {
        let name = format!("/latte-hostile-{}", std::process::id());
        let cfg = latte::internals::region::latte_region_config { slot_capacity: 4, samples_per_slot: 64, id_capacity: 0, mode: 0, if_taken: 0, budget_mib: 0 };
        latte::internals::recorder::install_shared(name.as_bytes(), &cfg).unwrap();
        for k in 0..100 {
            let id = if k % 2 == 0 { c"alpha" } else { c"beta" };
            latte::internals::ffi::latte_start(id.as_ptr(), LATTE_MODE_FAST);
            latte::internals::ffi::latte_stop(core::ptr::null(), LATTE_MODE_FAST);
        }
        let m = Mapping::open_shm(name.as_bytes()).unwrap();
        let len = m.view().published_size() as usize;
        // SAFETY: the mapping is readable for its validated total size.
        let bytes = unsafe { std::slice::from_raw_parts(m.view().base(), len) }.to_vec();
        latte::shm::unlink(name.as_bytes()).unwrap();
        bytes
    })
}

/// Copies `bytes` to memory that ends at a PROT_NONE page and runs `f` on it.
fn guarded<R>(bytes: &[u8], f: impl FnOnce(*const u8, usize) -> R) -> R {
    let page = 4096;
    let body = bytes.len().div_ceil(page) * page;
    // SAFETY: a fresh anonymous mapping of body + one guard page.
    let p = unsafe { libc::mmap(core::ptr::null_mut(), body + page, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) }
        as *mut u8;
    assert!(!p.is_null());
    // SAFETY: inside the mapping; the guard page is the last one.
    unsafe { libc::mprotect(p.add(body) as *mut libc::c_void, page, libc::PROT_NONE) };
    // The image ends within 63 bytes of the guard page (its start stays
    // 64-byte aligned, as the layout's atomics need).
    // SAFETY: start + bytes.len() <= body.
    let start = unsafe { p.add((body - bytes.len()) & !63) };
    // SAFETY: as above; the mapping is ours and writable, `bytes` is not in it.
    unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), start, bytes.len()) };
    let r = f(start, bytes.len());
    // SAFETY: our mapping.
    unsafe { libc::munmap(p as *mut libc::c_void, body + page) };
    r
}

/// Opens and reads everything; returns the first error.
fn exercise(base: *const u8, len: usize) -> Result<usize, latte::Error> {
    // SAFETY: readable for len bytes, page aligned, alive during the call.
    let v = unsafe { View::new(base, len) }?;
    let mut n = 0;
    for id in v.ids()? {
        n += id.name.len();
    }
    for s in v.slots()? {
        let mut c = latte_cursor::default();
        let mut out = Vec::new();
        v.read_slot(s.index, &mut c, &mut out, latte::ReadMode::Live)?;
        v.read_slot(s.index, &mut c, &mut out, latte::ReadMode::Final)?;
        n += out.len();
    }
    let _ = v.counters();
    let _ = v.calibration();
    let c = latte::report::collect(&v)?;
    let rows = latte::report::rows_of_view(&v, LATTE_DATA_CALIBRATED, &v.calibration())?;
    Ok(n + rows.len() + c.events.len())
}

fn put_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}
fn put_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

use core::mem::offset_of;
type H = latte_region_header;

#[test]
fn the_valid_image_reads() {
    let n = guarded(image(), exercise).unwrap();
    assert!(n > 0);
}

#[test]
fn each_hostile_object_gives_its_error() {
    let img = image();
    let check = |b: &[u8], want: i32| assert_eq!(guarded(b, exercise).err().map(latte::Error::code), Some(want));
    // Truncated.
    check(&img[..img.len() - 1], LATTE_ERR_TRUNCATED);
    check(&img[..300], LATTE_ERR_TRUNCATED);
    check(&img[..4], LATTE_ERR_NOT_LATTE);
    // Wrong magic.
    let mut b = img.clone();
    b[0] = b'X';
    check(&b, LATTE_ERR_NOT_LATTE);
    // A future version, and a past one.
    let mut b = img.clone();
    put_u32(&mut b, offset_of!(H, version), LATTE_LAYOUT_VERSION + 1);
    check(&b, LATTE_ERR_VERSION);
    put_u32(&mut b, offset_of!(H, version), LATTE_LAYOUT_VERSION - 1);
    check(&b, LATTE_ERR_VERSION);
    // Capacities that overflow.
    let mut b = img.clone();
    put_u32(&mut b, offset_of!(H, first_slots), u32::MAX);
    put_u32(&mut b, offset_of!(H, samples_per_slot), 1 << 31);
    check(&b, LATTE_ERR_CORRUPT);
    // Sizes that disagree with the geometry.
    let mut b = img.clone();
    put_u64(&mut b, offset_of!(H, slot_stride), 8);
    check(&b, LATTE_ERR_CORRUPT);
    // Counts beyond capacities.
    let mut b = img.clone();
    put_u32(&mut b, offset_of!(H, ids_used), 100_000);
    check(&b, LATTE_ERR_CORRUPT);
    let mut b = img.clone();
    put_u32(&mut b, offset_of!(H, slots_used), 5);
    check(&b, LATTE_ERR_CORRUPT);
    // A write_idx far beyond capacity.
    let slots = u64::from_le_bytes(img[offset_of!(H, slot_chunks)..][..8].try_into().unwrap()) as usize;
    let mut b = img.clone();
    put_u64(&mut b, slots, u64::MAX - 3);
    check(&b, LATTE_ERR_CORRUPT);
    // A slot naming an unpublished ID.
    let mut b = img.clone();
    put_u32(&mut b, slots + offset_of!(latte_slot_header, id_token), 200);
    check(&b, LATTE_ERR_CORRUPT);
    // A name longer than any name.
    let names = u64::from_le_bytes(img[offset_of!(H, name_chunks)..][..8].try_into().unwrap()) as usize;
    let mut b = img.clone();
    put_u32(&mut b, names, LATTE_MAX_NAME_LEN + 2);
    check(&b, LATTE_ERR_CORRUPT);
    // A name record cut by its chunk's end: the first record made to end
    // past the last byte of a whole chunk.
    let mut b = img.clone();
    put_u32(&mut b, names, LATTE_MAX_NAME_LEN + 1);
    let mut at = names + name_record_bytes(LATTE_MAX_NAME_LEN as u64) as usize;
    while at + 4 <= names + name_chunk_bytes(0) as usize {
        put_u32(&mut b, at, LATTE_MAX_NAME_LEN + 1);
        at += name_record_bytes(LATTE_MAX_NAME_LEN as u64) as usize;
    }
    put_u32(&mut b, offset_of!(H, ids_used), 1000);
    check(&b, LATTE_ERR_CORRUPT);
    // A chunk at an offset that is not a page's.
    let mut b = img.clone();
    put_u64(&mut b, offset_of!(H, slot_chunks), slots as u64 + 8);
    check(&b, LATTE_ERR_CORRUPT);
}

#[test]
fn hostile_files_through_the_file_reader() {
    let dir = std::env::temp_dir().join(format!("latte-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("img");
    std::fs::write(&f, image()).unwrap();
    assert!(Mapping::open_file(&f).is_ok());
    std::fs::write(&f, &image()[..1000]).unwrap();
    assert_eq!(Mapping::open_file(&f).err().map(latte::Error::code), Some(LATTE_ERR_TRUNCATED));
    std::fs::write(&f, b"").unwrap();
    assert_eq!(Mapping::open_file(&f).err().map(latte::Error::code), Some(LATTE_ERR_NOT_LATTE));
    std::fs::write(&f, vec![0u8; 100_000]).unwrap();
    assert_eq!(Mapping::open_file(&f).err().map(latte::Error::code), Some(LATTE_ERR_NOT_LATTE));
    assert_eq!(Mapping::open_file(&dir.join("absent")).err().map(latte::Error::code), Some(-libc::ENOENT));
    std::fs::remove_dir_all(&dir).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, .. ProptestConfig::default() })]

    /// Random byte mutations and truncations of a valid image never crash,
    /// hang or read out of bounds: they read, or give an error code.
    #[test]
    fn mutated_images_never_crash(muts in proptest::collection::vec((0usize..100_000, any::<u8>()), 1..12), cut in 0usize..100_000, truncate in any::<bool>()) {
        let mut b = image().clone();
        let len = b.len();
        for (off, v) in muts {
            // Bias half of the mutations into the header, where they matter most.
            let off = if off % 2 == 0 { off % LATTE_HEADER_SIZE as usize } else { off % len };
            b[off] = v;
        }
        if truncate {
            b.truncate(cut % len);
        }
        let r = guarded(&b, exercise);
        if let Err(e) = r {
            prop_assert!(e.code() < 0);
        }
    }
}
