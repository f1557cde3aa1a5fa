//! ID names: the stored form of an ID's text (at most 31 bytes), the same
//! in the region's table, the reader, the report and the trace.
//!
//! Rules:
//! - Same text, same token (two equal strings at two addresses merge).
//! - A NULL id is the name `<null-id>`.
//! - A name longer than 31 bytes is stored as its first bytes (cut at a UTF-8
//!   boundary, at most 26), `~`, and 4 hex digits of a hash of the whole
//!   text: long IDs stay distinct and recognisable.

use crate::layout::LATTE_ID_NAME_SIZE;
use core::ffi::c_char;

/// The name a NULL id records under.
pub const NULL_ID_NAME: &[u8] = b"<null-id>";

/// A name as stored in the table: up to 31 bytes.
pub type Name = [u8; LATTE_ID_NAME_SIZE as usize];

/// The ID calibration records under (hidden from reports and extraction).
pub const CALIBRATION_ID: &core::ffi::CStr = c"latte.calibrate";

/// Whether a name is reserved for latte's own use (calibration): such IDs
/// are hidden from reports and extraction.
pub fn is_reserved_name(name: &[u8]) -> bool {
    name == CALIBRATION_ID.to_bytes()
}

fn fnv1a(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in bytes {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// The stored form of a name's bytes (see the module rules).
pub fn normalize_bytes(text: &[u8]) -> Name {
    let mut out = [0u8; LATTE_ID_NAME_SIZE as usize];
    let max = LATTE_ID_NAME_SIZE as usize - 1;
    if text.len() <= max {
        out[..text.len()].copy_from_slice(text);
        return out;
    }
    // Cut at a UTF-8 boundary: never start the cut on a continuation byte.
    let mut cut = 26;
    while cut > 0 && (text[cut] & 0xC0) == 0x80 {
        cut -= 1;
    }
    out[..cut].copy_from_slice(&text[..cut]);
    let h = fnv1a(text);
    let folded = (h ^ (h >> 16)) & 0xFFFF;
    let tail = format!("~{folded:04x}");
    out[cut..cut + 5].copy_from_slice(tail.as_bytes());
    out
}

/// The stored form of a C string (NULL allowed).
///
/// # Safety
/// `id` is NULL or points to a NUL-terminated string.
pub unsafe fn normalize(id: *const c_char) -> Name {
    if id.is_null() {
        return normalize_bytes(NULL_ID_NAME);
    }
    // SAFETY: the caller guarantees a NUL-terminated string.
    normalize_bytes(unsafe { core::ffi::CStr::from_ptr(id) }.to_bytes())
}

/// The bytes of a stored name, up to its NUL.
pub fn name_bytes(n: &Name) -> &[u8] {
    let len = n.iter().position(|&b| b == 0).unwrap_or(n.len());
    &n[..len]
}
