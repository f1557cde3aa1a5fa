//! Finding regions (steps 3 to 7 of the module doc): the names in
//! /dev/shm (or those asked for), what is new, what refers to another
//! object, what was renamed, what is gone.

use super::read::{open, read_object, skip_to_end, Opened};
use super::{lineage_end, note_unseen, Counts, Object, Rings, State, SHM_DIR};
use std::collections::{HashMap, HashSet};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::time::Instant;

impl State {
    /// The names to watch now, each with the object it refers to and its
    /// size.
    fn listing(&self) -> Vec<(Vec<u8>, (u64, u64), u64)> {
        let ident = |m: &std::fs::Metadata| (m.dev(), m.ino());
        if !self.opts.regions.is_empty() {
            return self
                .opts
                .regions
                .iter()
                .filter_map(|n| {
                    let m = std::fs::symlink_metadata(std::ffi::OsStr::from_bytes(&[SHM_DIR.as_bytes(), n].concat())).ok()?;
                    Some((n.clone(), ident(&m), m.len()))
                })
                .collect();
        }
        let Ok(dir) = std::fs::read_dir(SHM_DIR) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for e in dir.flatten() {
            let name = e.file_name();
            let name = name.as_bytes();
            // Regular files only (a latte region is one; shm_open does not
            // follow links), read from the directory entry where it can.
            if name.starts_with(latte::shm::NEW_OBJECT_PREFIX.as_bytes()) || !e.file_type().is_ok_and(|t| t.is_file()) {
                continue;
            }
            if let Ok(m) = e.metadata() {
                let mut full = b"/".to_vec();
                full.extend_from_slice(name);
                out.push((full, ident(&m), m.len()));
            }
        }
        out
    }

    /// Steps 3 to 7 of the module doc: opens what is new, gives the old
    /// object of a changed or vanished name its last pass, moves a renamed
    /// object to its new name, lets go of what has been gone for
    /// `--keep-gone`.
    pub(super) fn scan(&mut self, now: Instant) {
        let listing = self.listing();
        let from_start = self.scanned;
        let named = !self.opts.regions.is_empty();
        let mut moved = self.let_go_of_vanished(&listing, now);
        // Step 7: which name holds each object still held.
        let held: HashMap<(u64, u64), Vec<u8>> = self.regions.iter().filter_map(|(n, r)| Some((r.object.as_ref()?.ident, n.clone()))).collect();
        for (name, ident, len) in &listing {
            if self.foreign.get(name) == Some(&(*ident, *len)) {
                continue;
            }
            if let Some(r) = self.regions.get_mut(name) {
                if r.object.as_ref().is_some_and(|o| o.ident == *ident) {
                    continue;
                }
                if let Some(mut o) = r.object.take() {
                    read_object(r, &mut o, self.opts.per_thread, self.own_cpn, &mut self.buf, now);
                    r.lineage_end = lineage_end(&o.map.view());
                }
            }
            if let Some(o) = moved.remove(name) {
                self.hold(name, o, None);
                continue;
            }
            if held.get(ident).is_some_and(|n| n != name) {
                continue; // another name of an object held (step 7)
            }
            match open(name, *ident) {
                Opened::Region(map) => {
                    let mut o = Box::new(Object { map: *map, ident: *ident, last: Counts::default(), rings: Rings::new(self.opts.max_ids) });
                    if !from_start {
                        skip_to_end(&mut o, &mut self.buf);
                    }
                    self.hold(name, o, Some(from_start));
                }
                Opened::Foreign if !named => {
                    self.foreign.insert(name.clone(), (*ident, *len));
                    // Not a region (any more): a region's series stay until
                    // --keep-gone, as for a name that went away.
                    if let Some(r) = self.regions.get_mut(name) {
                        r.gone.get_or_insert(now);
                    }
                }
                Opened::Foreign => self.unreadable(name, "not a latte region".into()),
                Opened::Unreadable(why) => self.unreadable(name, why),
                Opened::Vanished => {}
            }
        }
        self.expire(now);
        self.scanned = true;
    }

    /// Steps 4 and 7 for the names not in `listing`: each object's last
    /// pass; those listed under another name (renamed) are returned by
    /// that name, the others dropped.
    fn let_go_of_vanished(&mut self, listing: &[(Vec<u8>, (u64, u64), u64)], now: Instant) -> HashMap<Vec<u8>, Box<Object>> {
        let present: HashSet<&[u8]> = listing.iter().map(|(n, _, _)| n.as_slice()).collect();
        let listed: HashMap<(u64, u64), &[u8]> = listing.iter().map(|(n, ident, _)| (*ident, n.as_slice())).collect();
        let (per_thread, own_cpn) = (self.opts.per_thread, self.own_cpn);
        let mut moved = HashMap::new();
        for (name, r) in self.regions.iter_mut() {
            if !present.contains(name.as_slice()) {
                if let Some(mut o) = r.object.take() {
                    read_object(r, &mut o, per_thread, own_cpn, &mut self.buf, now);
                    if let Some(to) = listed.get(&o.ident) {
                        moved.insert(to.to_vec(), o);
                    }
                }
                // Step 6: whatever comes under the name next begins a chain.
                r.lineage_end = Some((0, 0));
                r.unreadable = None;
                r.alive = false;
                r.gone.get_or_insert(now);
            }
        }
        self.foreign.retain(|n, _| present.contains(n.as_slice()));
        moved
    }

    /// Holds `o` under `name`: an object opened now (`found`: whether
    /// after the first scan, for step 6), or one moved from its old name
    /// (None, step 7).
    fn hold(&mut self, name: &[u8], o: Box<Object>, found: Option<bool>) {
        let r = self.regions.entry(name.to_vec()).or_default();
        if let Some(from_start) = found {
            note_unseen(r, &o.map.view(), from_start);
        }
        r.lineage_end = None;
        *r.object = Some(o);
        r.unreadable = None;
        r.gone = None;
        r.seen = true;
    }

    /// Step 5: lets go of the series and names gone for `--keep-gone`.
    fn expire(&mut self, now: Instant) {
        let keep = self.opts.keep_gone;
        self.regions.retain(|_, r| {
            let expired = |t: &Option<Instant>| t.is_some_and(|t| now.duration_since(t) >= keep);
            r.series.retain(|_, s| !expired(&s.ended));
            !(expired(&r.gone) || (r.gone.is_some() && !r.seen))
        });
    }

    fn unreadable(&mut self, name: &[u8], why: String) {
        let r = self.regions.entry(name.to_vec()).or_default();
        r.unreadable = Some(why);
        r.gone = None;
    }
}
