//! The commands that compare runs: `record` follows a live region into a
//! file, `diff` compares two sources per ID, `plot` draws them.

pub mod diff;
pub mod plot;
pub mod record;
