//! What the exporter keeps per mapped object: its mapping and identity,
//! and how it reads the object's rings (cursors, owners, pacing, labels,
//! buckets).

use super::{Buckets, Counts, SeriesKey};
use latte::pace::{PaceOptions, Pacing};
use latte::reader::Cursors;
use latte::Mapping;

/// A mapped object under a region's name, with the exporter's cursors.
pub(super) struct Object {
    pub(super) map: Mapping,
    /// (device, inode) of the object, to see a name come to refer to another.
    pub(super) ident: (u64, u64),
    /// Region counters at the previous pass.
    pub(super) last: Counts,
    pub(super) rings: Rings,
}

/// How the exporter reads one object's rings.
pub(super) struct Rings {
    pub(super) cursors: Cursors,
    /// Per slot, the series its owner at the previous read fed: where the
    /// samples it never read of that owner (and of owners it never saw)
    /// are counted lost when the slot has a new owner.
    pub(super) owners: Vec<Option<SeriesKey>>,
    /// When each slot is due for its next look (`State::follow`).
    pub(super) pacing: Pacing,
    /// Per ID token, the ID's label (None: not exported; `FOLDED` past
    /// `max_ids`), as of the last time the IDs were listed.
    pub(super) names: Vec<Option<String>>,
    /// IDs with series of their own (0: all).
    pub(super) max_ids: usize,
    /// Cycles per ns the buckets below were made for (0: none yet).
    pub(super) cpn: f64,
    /// The duration histogram's buckets in cycles.
    pub(super) buckets: Buckets,
    /// When the first of its slots is due (ns; 0: at once).
    pub(super) due_ns: u64,
    /// When a look or a pass last found a ring written (or rings handed
    /// out or reused), or the object was mapped, ns.
    pub(super) active_ns: u64,
}

impl Rings {
    pub(super) fn new(max_ids: usize) -> Rings {
        Rings {
            cursors: Cursors::new(),
            owners: Vec::new(),
            pacing: Pacing::new(PaceOptions::many()),
            names: Vec::new(),
            max_ids,
            cpn: 0.0,
            buckets: Buckets::new(1.0),
            due_ns: 0,
            // A region found is looked at for new rings often at first.
            active_ns: latte::pace::now_ns(),
        }
    }
}

/// The object of a region name, when it is mapped. A copy of a region (what
/// a scrape encodes) holds none.
#[derive(Default)]
pub(super) struct Held(Option<Box<Object>>);

impl Clone for Held {
    fn clone(&self) -> Held {
        Held(None)
    }
}

impl std::ops::Deref for Held {
    type Target = Option<Box<Object>>;
    fn deref(&self) -> &Option<Box<Object>> {
        &self.0
    }
}

impl std::ops::DerefMut for Held {
    fn deref_mut(&mut self) -> &mut Option<Box<Object>> {
        &mut self.0
    }
}
