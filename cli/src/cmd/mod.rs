//! One module per subcommand: each reads its targets through
//! `crate::target`, prints through `crate::term` and fails through
//! `crate::exit`.

pub mod diff;
pub mod ls;
pub mod plot;
pub mod plot_text;
pub mod record;
pub mod rm;
pub mod serve;
pub mod stats;
pub mod trace;
pub mod watch;
