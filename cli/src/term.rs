//! What the output looks like: colour and width from the terminal, text
//! tables fitted to it, the fields of plain `key=value` lines, and writing
//! to standard output.

use crate::exit::{fail, EXIT_OTHER};
use clap::ValueEnum;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

/// When to colour the output (`--color`).
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorWhen {
    Auto,
    Always,
    Never,
}

/// What the output looks like.
#[derive(Clone, Copy)]
pub struct Style {
    pub color: bool,
    /// Lines no wider than this (None: no limit).
    pub width: Option<usize>,
    /// Standard output is a terminal that can take cursor escapes.
    pub tty: bool,
}

pub fn dumb_term() -> bool {
    std::env::var_os("TERM").is_some_and(|t| t == "dumb")
}

impl Style {
    pub fn detect(when: ColorWhen) -> Style {
        let tty = std::io::stdout().is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let color = match when {
            ColorWhen::Always => true,
            ColorWhen::Never => false,
            ColorWhen::Auto => tty && !no_color && !dumb_term(),
        };
        Style { color, width: terminal_width(tty), tty: tty && !dumb_term() }
    }
}

/// The terminal's width: the window size of standard output when it is a
/// terminal, else `COLUMNS` when set; None for a pipe without `COLUMNS`.
pub fn terminal_width(tty: bool) -> Option<usize> {
    if tty {
        // SAFETY: an all-zero winsize is valid; TIOCGWINSZ writes one on fd 1.
        let mut ws: libc::winsize = unsafe { core::mem::zeroed() };
        // SAFETY: fd 1 is open; ws is writable.
        if unsafe { libc::ioctl(1, libc::TIOCGWINSZ, &mut ws) } == 0 && ws.ws_col > 0 {
            return Some(ws.ws_col as usize);
        }
    }
    std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse::<usize>().ok()).filter(|&c| c > 0)
}

/// Writes to standard output; a failure (a full disk, a closed pipe) is
/// reported once, with exit code 1.
pub fn emit(text: &str) -> Result<(), ExitCode> {
    let mut o = std::io::stdout().lock();
    match o.write_all(text.as_bytes()).and_then(|_| o.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(ExitCode::SUCCESS),
        Err(e) => Err(fail("standard output", &format!("cannot write: {e}"), EXIT_OTHER)),
    }
}

/// A text table: column k left-aligned when `align[k]` is 'l', else
/// right-aligned; columns dropped from the right until the lines fit `width`.
pub fn table(head: &[&str], align: &str, rows: &[Vec<String>], width: Option<usize>) -> String {
    let align: Vec<char> = align.chars().collect();
    let mut widths: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (k, c) in r.iter().enumerate() {
            widths[k] = widths[k].max(c.chars().count());
        }
    }
    let mut n = head.len();
    while n > 1 && width.is_some_and(|w| widths[..n].iter().sum::<usize>() + 2 * (n - 1) > w) {
        n -= 1;
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (k, c) in cells.iter().take(n).enumerate() {
            if k > 0 {
                s.push_str("  ");
            }
            let w = widths[k];
            if align.get(k) == Some(&'l') {
                s.push_str(&format!("{c:<w$}"));
            } else {
                s.push_str(&format!("{c:>w$}"));
            }
        }
        s.truncate(s.trim_end().len());
        s.push('\n');
        s
    };
    let mut out = line(head.to_vec());
    for r in rows {
        out.push_str(&line(r.iter().map(|s| s.as_str()).collect()));
    }
    out
}

/// `1.5 KiB`, `128.0 MiB`.
pub fn size_text(bytes: u64) -> String {
    let b = bytes as f64;
    if b < 1024.0 {
        format!("{bytes} B")
    } else if b < 1024.0 * 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else if b < 1024.0 * 1024.0 * 1024.0 {
        format!("{:.1} MiB", b / (1024.0 * 1024.0))
    } else {
        format!("{:.1} GiB", b / (1024.0 * 1024.0 * 1024.0))
    }
}

/// `2026-01-31T12:34:56.789Z` (UTC) of a wall-clock time.
pub fn timestamp(t: std::time::SystemTime) -> String {
    let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = ((secs / 86400) as i64, secs % 86400);
    // Civil date from days since 1970-01-01 (proleptic Gregorian calendar).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + (month <= 2) as i64;
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z", rem / 3600, rem % 3600 / 60, rem % 60, d.subsec_millis())
}

/// A name as one `key=value` field: as is when it has no space, quote,
/// backslash, `=` or control character, else JSON-quoted.
pub fn field(name: &str) -> String {
    if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c.is_control() || c == '"' || c == '\\' || c == '=') {
        serde_json::to_string(name).unwrap_or_else(|_| "\"?\"".into())
    } else {
        name.to_string()
    }
}

/// Bytes as text (a name, an ID, a region, a label value), as every tool
/// shows them: `latte::name::name_text` (UTF-8 as is but a backslash
/// doubled, any other byte as `\xNN`), so two names never share a text.
pub fn label_text(bytes: &[u8]) -> String {
    latte::name::name_text(bytes)
}

/// The name's text an `--id` argument stands for: the argument itself when
/// it is a name as the tools show it (`caf\xe9`, `a\\b`), else the name
/// whose bytes it is (a raw byte, a lone backslash typed as itself).
pub fn id_text(arg: &[u8]) -> String {
    match std::str::from_utf8(arg) {
        Ok(s) if latte::name::name_from_text(s).is_some_and(|b| label_text(&b) == s) => s.to_string(),
        _ => label_text(arg),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps_are_utc_civil_dates() {
        let t = |s: u64, ms: u64| timestamp(std::time::UNIX_EPOCH + Duration::from_millis(s * 1000 + ms));
        assert_eq!(t(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(t(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(t(1_798_761_599, 999), "2026-12-31T23:59:59.999Z");
    }

    #[test]
    fn names_are_single_fields() {
        assert_eq!(field("svc.a"), "svc.a");
        assert_eq!(field("a b"), "\"a b\"");
        assert_eq!(field("k=v"), "\"k=v\"");
        assert_eq!(field(""), "\"\"");
    }

    #[test]
    fn id_arguments_are_shown_texts_or_bytes() {
        // As shown: the byte name, the look-alike (backslash doubled).
        assert_eq!(id_text(b"caf\\xe9"), "caf\\xe9");
        assert_eq!(id_text(b"caf\\\\xe9"), "caf\\\\xe9");
        // Raw bytes, and texts no tool shows (a lone backslash, `\x41`).
        assert_eq!(id_text(b"caf\xe9"), "caf\\xe9");
        assert_eq!(id_text(b"a\\b"), "a\\\\b");
        assert_eq!(id_text(b"\\x41"), "\\\\x41");
    }

    #[test]
    fn tables_drop_columns_to_fit() {
        let rows = vec![vec!["name".to_string(), "12345".to_string(), "x".to_string()]];
        let t = table(&["NAME", "NUMBER", "X"], "lrr", &rows, Some(13));
        assert!(t.lines().all(|l| l.chars().count() <= 13), "{t}");
        assert!(t.contains("NUMBER") && !t.contains(" X"), "{t}");
        assert!(table(&["NAME", "NUMBER", "X"], "lrr", &rows, None).contains(" X"));
    }
}
