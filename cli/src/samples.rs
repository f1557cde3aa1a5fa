//! Every sample of a source (a live region, a flushed image or a
//! recording), per ID, for `diff` and `plot`.

use crate::exit::{fail, EXIT_NOT_REGION};
use crate::target::open;
use latte::layout::{LATTE_MAX_DURATION, LATTE_SAMPLE_SWITCHED};
use latte::reader::{latte_raw_sample, Cursors, ReadMode};
use std::process::ExitCode;

/// One ID's samples, slot by slot, each ring oldest first.
pub struct IdSamples {
    pub name: String,
    pub samples: Vec<latte_raw_sample>,
    /// Samples of this ID the source knows were lost (a region's overwritten
    /// ones, a recording's lost while following).
    pub lost: u64,
}

/// A source read whole.
pub struct Source {
    /// The target as given.
    pub label: String,
    /// Cycles per ns: the producer's figure, else measured here.
    pub cycles_per_ns: f64,
    /// Whether the producer published its own figure.
    pub producer_frequency: bool,
    /// Whether the producer tracked switches (else `switched` is unknown,
    /// not false).
    pub switches_tracked: bool,
    /// IDs with at least one sample, in token order.
    pub ids: Vec<IdSamples>,
}

impl Source {
    pub fn id(&self, name: &str) -> Option<&IdSamples> {
        self.ids.iter().find(|i| i.name == name)
    }
}

/// A sample's duration in cycles.
pub fn duration(s: &latte_raw_sample) -> u64 {
    s.packed & LATTE_MAX_DURATION
}

/// Whether the sample's thread was switched out during it.
pub fn switched(s: &latte_raw_sample) -> bool {
    s.packed & LATTE_SAMPLE_SWITCHED != 0
}

/// Reads every sample of `target` (reserved IDs left out).
pub fn load(raw: &std::ffi::OsStr) -> Result<Source, ExitCode> {
    let m = open(raw)?;
    let target = &crate::target::shown(std::os::unix::ffi::OsStrExt::as_bytes(raw));
    let v = m.view();
    let bad = |e: latte::Error| fail(target, &e.to_string(), EXIT_NOT_REGION);
    let names = v.ids().map_err(bad)?;
    let slots = v.slots().map_err(bad)?;
    let cap = v.geo().samples_per_slot as u64;
    let mut ids: Vec<IdSamples> =
        names.iter().map(|i| IdSamples { name: latte::name::name_text(latte::name::name_bytes(&i.name)), samples: Vec::new(), lost: 0 }).collect();
    let hidden: Vec<bool> = names.iter().map(|i| latte::name::is_reserved_name(latte::name::name_bytes(&i.name))).collect();
    let mut holds = vec![0u64; ids.len()];
    for s in &slots {
        if let Some(h) = holds.get_mut(s.id_token as usize) {
            *h += s.write_idx.min(cap);
        }
    }
    for (k, id) in ids.iter_mut().enumerate() {
        id.samples.try_reserve_exact(holds[k] as usize).map_err(|_| fail(target, "not enough memory for its samples", 1))?;
    }
    let mut cursors = Cursors::new();
    for s in &slots {
        let t = s.id_token as usize;
        if t >= ids.len() || hidden[t] {
            continue;
        }
        let r = cursors.read(&v, s, &mut ids[t].samples, ReadMode::Live).map_err(bad)?;
        ids[t].lost = ids[t].lost.saturating_add(s.write_idx.saturating_sub(r.read));
    }
    if let Some(rec) = m.recording().map_err(|e| fail(target, &crate::recording::trailer_error(e), EXIT_NOT_REGION))? {
        // `ids` is by token.
        let lost = rec.lost_by_token(None);
        for (id, l) in ids.iter_mut().zip(lost) {
            id.lost = id.lost.saturating_add(l);
        }
    }
    let own = v.calibration().cycles_per_ns;
    let ids = ids.into_iter().zip(hidden).filter(|(i, h)| !h && !i.samples.is_empty()).map(|(i, _)| i).collect();
    Ok(Source {
        label: target.to_string(),
        cycles_per_ns: crate::target::cycles_per_ns(&v),
        producer_frequency: own > 0.0,
        switches_tracked: v.switches_tracked(),
        ids,
    })
}
