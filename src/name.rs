//! ID names: the stored form of an ID's text, the same in the region's
//! name records, the reader, the report and the trace.
//!
//! Rules:
//! - Same text, same token (two equal strings at two addresses merge).
//! - A NULL id is the name `<null-id>`.
//! - A name of up to `LATTE_MAX_NAME_LEN` (4,096) bytes is stored whole.
//! - A longer one is stored as its first bytes (cut at a UTF-8 boundary, at
//!   most `LATTE_MAX_NAME_LEN` less the 17 of the suffix,
//!   `CUT_SUFFIX_LEN`), `~`, and 16 hex digits of a 64-bit hash of the
//!   whole text: long IDs stay recognisable, and two that differ stay
//!   distinct unless their hashes agree (odds of 2^-64 for a pair). A text
//!   that is itself such a stored form merges with the long ID it stands
//!   for.

use crate::layout::LATTE_MAX_NAME_LEN;
use core::ffi::c_char;

/// The name a NULL id records under.
pub const NULL_ID_NAME: &[u8] = b"<null-id>";

/// A name as stored in the region: up to `LATTE_MAX_NAME_LEN` bytes.
pub type Name = Vec<u8>;

/// The ID calibration records under (hidden from reports and extraction).
pub const CALIBRATION_ID: &core::ffi::CStr = c"latte.calibrate";

/// Whether a name is reserved for latte's own use (calibration): such IDs
/// are hidden from reports and extraction.
pub fn is_reserved_name(name: &[u8]) -> bool {
    name == CALIBRATION_ID.to_bytes()
}

/// FNV-1a's 64-bit offset basis.
const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a's 64-bit prime.
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
/// Bytes a cut name ends with: `~`, then its 64-bit hash in 16 hex digits.
const CUT_SUFFIX_LEN: usize = 1 + 16;

/// FNV-1a's 64-bit hash of `bytes`.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h = FNV_OFFSET_BASIS;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

/// The stored form of a name's bytes (see the module rules).
pub fn normalize_bytes(text: &[u8]) -> Name {
    match try_normalize_bytes(text) {
        Some(n) => n,
        None => std::alloc::handle_alloc_error(std::alloc::Layout::array::<u8>(stored_len(text).0).expect("a name's length fits a layout")),
    }
}

/// The stored form of a name's bytes, or None when the memory for it
/// cannot be had (the recorder's slow path must not abort the program).
pub fn try_normalize_bytes(text: &[u8]) -> Option<Name> {
    let (len, keep) = stored_len(text);
    let mut out = Vec::new();
    out.try_reserve_exact(len).ok()?;
    out.extend_from_slice(&text[..keep]);
    if keep < text.len() {
        out.push(b'~');
        out.extend_from_slice(&hash_hex(text));
    }
    Some(out)
}

/// The 16 hex digits of a cut name's suffix.
fn hash_hex(text: &[u8]) -> [u8; 16] {
    let h = fnv1a(text);
    core::array::from_fn(|i| b"0123456789abcdef"[((h >> (4 * (15 - i))) & 0xf) as usize])
}

/// Whether the ID `id` has the stored form `name`, without allocating.
///
/// # Safety
/// `id` is NULL or points to a NUL-terminated string.
pub unsafe fn id_is(id: *const c_char, name: &[u8]) -> bool {
    // SAFETY: forwarded from the caller.
    let text = unsafe { id_text(id) };
    let (len, keep) = stored_len(text);
    if len != name.len() || text[..keep] != name[..keep] {
        return false;
    }
    keep == text.len() || (name[keep] == b'~' && name[keep + 1..] == hash_hex(text))
}

/// (bytes of the stored form, bytes of the text it keeps).
fn stored_len(text: &[u8]) -> (usize, usize) {
    let max = LATTE_MAX_NAME_LEN as usize;
    if text.len() <= max {
        return (text.len(), text.len());
    }
    // Cut at a UTF-8 boundary: never start the cut on a continuation byte.
    let mut cut = max - CUT_SUFFIX_LEN;
    while cut > 0 && (text[cut] & 0xC0) == 0x80 {
        cut -= 1;
    }
    (cut + CUT_SUFFIX_LEN, cut)
}

/// The stored form of a C string (NULL allowed).
///
/// # Safety
/// `id` is NULL or points to a NUL-terminated string.
pub unsafe fn normalize(id: *const c_char) -> Name {
    // SAFETY: forwarded from the caller.
    normalize_bytes(unsafe { id_text(id) })
}

/// The stored form of a C string (NULL allowed), or None when the memory
/// for it cannot be had.
///
/// # Safety
/// `id` is NULL or points to a NUL-terminated string.
pub unsafe fn try_normalize(id: *const c_char) -> Option<Name> {
    // SAFETY: forwarded from the caller.
    try_normalize_bytes(unsafe { id_text(id) })
}

/// The text of an ID: its bytes, or `NULL_ID_NAME` for NULL.
///
/// # Safety
/// `id` is NULL or points to a NUL-terminated string, which outlives the result.
unsafe fn id_text<'a>(id: *const c_char) -> &'a [u8] {
    if id.is_null() {
        return NULL_ID_NAME;
    }
    // SAFETY: the caller guarantees a NUL-terminated string.
    unsafe { core::ffi::CStr::from_ptr(id) }.to_bytes()
}

/// The bytes of a stored name.
pub fn name_bytes(n: &Name) -> &[u8] {
    n
}

/// A name shown as text, injectively (two names never get one text):
/// UTF-8 as it is, but a backslash as `\\` and every byte that is not part
/// of UTF-8 as `\xNN` (two lowercase hex digits). Every tool that shows or
/// keys a name by text uses it: `latte stats`, `diff`, `trace`, `watch`,
/// `plot`, `serve`'s labels and Python's names. `name_from_text` undoes it.
pub fn name_text(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' {
                s.push('\\');
            }
            s.push(c);
        }
        for b in chunk.invalid() {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    s
}

/// The bytes a `name_text` stands for (a name given on a command line
/// as a tool shows it); None when the text is not such a form (a lone
/// backslash, `\x` without two hex digits).
pub fn name_from_text(text: &str) -> Option<Vec<u8>> {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
        } else if b.get(i + 1) == Some(&b'\\') {
            out.push(b'\\');
            i += 2;
        } else if b.get(i + 1) == Some(&b'x') && i + 4 <= b.len() {
            let hex = std::str::from_utf8(&b[i + 2..i + 4]).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 4;
        } else {
            return None;
        }
    }
    Some(out)
}

/// A name as the original Latte's own outputs show it (its report,
/// `DumpToJson`), from its `name_text`: its bytes, those that are not
/// UTF-8 as U+FFFD.
pub fn classic_text(text: &str) -> String {
    match name_from_text(text) {
        Some(b) => String::from_utf8_lossy(&b).into_owned(),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_text_is_injective_and_undone() {
        let names: [&[u8]; 6] = [b"caf\xe9", b"caf\xe8", b"caf\\xe9", b"a\\b", "caf\u{e9}".as_bytes(), b"x\xff\\"];
        let texts: Vec<String> = names.iter().map(|n| name_text(n)).collect();
        for (i, a) in texts.iter().enumerate() {
            assert_eq!(name_from_text(a).as_deref(), Some(names[i]), "{a}");
            for b in &texts[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(texts[0], "caf\\xe9");
        assert_eq!(texts[2], "caf\\\\xe9");
        assert_eq!(texts[4], "caf\u{e9}");
        assert_eq!(name_from_text("a\\"), None);
        assert_eq!(name_from_text("a\\xg0"), None);
    }

    #[test]
    fn id_is_agrees_with_the_stored_form() {
        let long = "x".repeat(LATTE_MAX_NAME_LEN as usize + 10);
        let longer = "x".repeat(LATTE_MAX_NAME_LEN as usize + 11);
        let texts: [&[u8]; 5] = [b"", b"a", b"ab", long.as_bytes(), longer.as_bytes()];
        for a in texts {
            let c = std::ffi::CString::new(a).unwrap();
            for b in texts {
                // SAFETY: a NUL-terminated string.
                assert_eq!(unsafe { id_is(c.as_ptr(), &normalize_bytes(b)) }, a == b, "{} {}", a.len(), b.len());
            }
        }
        // SAFETY: NULL is allowed.
        assert!(unsafe { id_is(core::ptr::null(), NULL_ID_NAME) });
    }
}
