//! Reading the objects under the watched names: opening a name, and the
//! read pass over one object (steps 1-4 of the counting protocol in
//! `super`).

use super::*;
use latte::pace::PaceOptions;

/// What opening a name gave.
pub(super) enum Opened {
    Region(Box<Mapping>),
    /// An object that is not a latte region (or not a regular file).
    Foreign,
    /// A region that cannot be read now, with why.
    Unreadable(String),
    /// The name went away (or came to refer to another object) meanwhile.
    Vanished,
}

pub(super) fn open(name: &[u8], ident: (u64, u64)) -> Opened {
    match Mapping::open_shm(name) {
        Ok(map) => {
            // The name still refers to the object listed (else the mapping
            // may be of its successor, which the next scan finds).
            let path = [SHM_DIR.as_bytes(), name].concat();
            let now = std::fs::symlink_metadata(std::ffi::OsStr::from_bytes(&path)).map(|m| (m.dev(), m.ino()));
            if now.ok() == Some(ident) {
                Opened::Region(Box::new(map))
            } else {
                Opened::Vanished
            }
        }
        Err(e) if e == Error::Os(libc::ENOENT) => Opened::Vanished,
        Err(e) if e == Error::NotLatte || e == Error::INVAL || e == Error::Os(libc::EISDIR) || e == Error::Os(libc::ENODEV) => Opened::Foreign,
        Err(e) if e == Error::Os(libc::EMFILE) => Opened::Unreadable("too many open files (the exporter's RLIMIT_NOFILE: one descriptor per region)".into()),
        Err(e) => Opened::Unreadable(crate::exit::strerror(e)),
    }
}

/// Step 3 for an object present at the first scan: every cursor to the end
/// of what its slot holds now.
pub(super) fn skip_to_end(o: &mut Object, buf: &mut Vec<latte_raw_sample>) {
    let v = o.map.view();
    o.last = Counts::of(&v);
    if let Ok(slots) = v.slots() {
        for s in slots {
            buf.clear();
            let _ = o.rings.cursors.read(&v, &s, buf, ReadMode::Live);
        }
    }
}

/// Step 1 for one object: reads every slot past its cursor into the
/// region's series, and the region counters' growth.
pub(super) fn read_object(r: &mut Region, o: &mut Object, per_thread: bool, own_cpn: f64, buf: &mut Vec<latte_raw_sample>, now: Instant) {
    // The region grows while it is read: map what it grew by first.
    if let Err(e) = o.map.refresh() {
        return failed(r, e);
    }
    let v = o.map.view();
    // Looked at before reading: when the producer was gone already, this
    // pass takes the last samples there will ever be.
    r.alive = o.map.producer_alive();
    r.pid = v.producer_pid();
    let k = &mut o.rings;
    note_figures(r, k, &v, own_cpn);
    let slots = match list_names(r, k, &v).and_then(|_| v.slots()) {
        Ok(x) => x,
        Err(e) => return failed(r, e),
    };
    let at = now_ns();
    for s in &slots {
        if let Err(e) = read_ring(r, k, &v, s, per_thread, buf, at) {
            failed(r, e);
        }
    }
    if per_thread {
        end_series_of_released_threads(r, &slots, &k.names, now);
    }
    let c = Counts::of(&v);
    r.counts.add_growth(&o.last, &c);
    o.last = c;
}

/// How long a region whose rings nobody writes is looked at for new rings
/// every millisecond, before it is looked at as seldom as a waiting ring
/// (`PaceOptions::many`): a service quiet for longer than this that starts
/// a thread recording flat out may lap that thread's first ring before
/// the first look (counted lost).
const QUIET_NS: u64 = 1_000_000_000;

/// The region's figures as they are now, before its samples are read: the
/// cycles per ns that convert them (the producer's, or `own_cpn` while it
/// has published none), the rings, whether switches are tracked.
fn note_figures(r: &mut Region, k: &mut Rings, v: &View<'_>, own_cpn: f64) {
    let cal = v.calibration();
    r.calibrated = cal.cycles_per_ns > 0.0;
    let cpn = if r.calibrated { cal.cycles_per_ns } else { own_cpn };
    if cpn != k.cpn {
        k.cpn = cpn;
        k.buckets = Buckets::new(cpn);
    }
    r.slot_capacity = v.slot_capacity().min(u32::MAX as u64) as u32;
    r.slots_used = v.slots_used();
    r.switches_tracked = v.switches_tracked();
    let c = v.counters();
    r.ring_bytes = c.committed_bytes;
    r.ring_budget = (c.budget_bytes != u64::MAX).then_some(c.budget_bytes);
}

/// The looks due between two passes at one object (`State::follow`):
/// reads each slot whose look is due; returns how long until the next is
/// (u64::MAX: none before the next pass), and whether it read a ring.
/// Looks count no error: what a look cannot read, the next pass reads or
/// says. A region whose producer was gone at the last pass is left to the
/// passes (nothing more comes).
pub(super) fn follow_object(r: &mut Region, o: &mut Object, per_thread: bool, own_cpn: f64, buf: &mut Vec<latte_raw_sample>, now: u64) -> (u64, bool) {
    // Before the first pass has set the buckets, the pass reads it.
    if o.rings.cpn == 0.0 || !r.alive {
        return (u64::MAX, false);
    }
    if o.rings.due_ns > now {
        return (o.rings.due_ns - now, false);
    }
    if o.map.refresh().is_err() {
        return (u64::MAX, false);
    }
    let v = o.map.view();
    let k = &mut o.rings;
    // Slots handed out or reused since the last look: those that had no
    // writer are looked at now.
    let c = Counts::of(&v);
    if k.pacing.handed(now, v.slots_used(), c.0[COUNT_REUSES]) {
        k.active_ns = now;
    }
    let used = (v.slots_used() as u64).min(v.slot_capacity()) as u32;
    // No slot due: this look cost the loads above, for slots new or reused.
    // A region none of whose rings was written for `QUIET_NS` is looked
    // at for new ones as seldom as its waiting rings are.
    let many = PaceOptions::many();
    let longest = if now.saturating_sub(k.active_ns) < QUIET_NS { many.max_interval_ns } else { many.idle_interval_ns };
    let first = k.pacing.wait_within(now, used as usize, longest);
    if first > 0 {
        k.due_ns = now.saturating_add(first);
        return (first, false);
    }
    // The figures as they are now, with the samples read.
    note_figures(r, k, &v, own_cpn);
    let mut read = false;
    for i in 0..used {
        if !k.pacing.is_due(i, now) {
            continue;
        }
        let s = match v.slot_info(i) {
            Ok(s) if s.generation != 0 => s,
            _ => {
                k.pacing.idle(i, now);
                continue;
            }
        };
        // An ID registered since the IDs were last listed.
        if s.id_token as usize >= k.names.len() && list_names(r, k, &v).is_err() {
            k.pacing.idle(i, now);
            continue;
        }
        read = true;
        if read_ring(r, k, &v, &s, per_thread, buf, now).is_err() {
            k.pacing.idle(i, now);
        }
    }
    r.counts.add_growth(&o.last, &c);
    o.last = c;
    let wait = k.pacing.wait_within(now, used as usize, longest);
    k.due_ns = now.saturating_add(wait);
    (wait, read)
}

/// A pass could not read the object: counted, and why kept.
fn failed(r: &mut Region, e: Error) {
    r.read_errors += 1;
    r.last_error = Some(crate::exit::strerror(e));
}

/// Lists the region's IDs again: each token's label (None for the
/// calibration's own spans, which are neither read nor exported), the
/// first `max_ids` in token order their own, the others `FOLDED`.
fn list_names(r: &mut Region, k: &mut Rings, v: &View<'_>) -> Result<(), Error> {
    let bound = if k.max_ids == 0 { usize::MAX } else { k.max_ids };
    let mut own = 0;
    k.names = v
        .ids()?
        .iter()
        .map(|i| {
            let n = latte::name::name_bytes(&i.name);
            if latte::name::is_reserved_name(n) {
                return None;
            }
            own += 1;
            Some(if own <= bound { label_text(n) } else { FOLDED.to_string() })
        })
        .collect();
    r.ids_folded = own.saturating_sub(bound) as u64;
    Ok(())
}

/// Reads slot `s` past its cursor into its series (step 1), and sets when
/// it is next due (`now`: ns).
fn read_ring(
    r: &mut Region,
    k: &mut Rings,
    v: &View<'_>,
    s: &latte::reader::latte_slot_info,
    per_thread: bool,
    buf: &mut Vec<latte_raw_sample>,
    now: u64,
) -> Result<(), Error> {
    let Some(Some(id)) = k.names.get(s.id_token as usize) else {
        k.pacing.idle(s.index, now);
        return Ok(());
    };
    let i = s.index as usize;
    buf.clear();
    let got = k.cursors.read(v, s, buf, ReadMode::Live)?;
    let cur = k.cursors.get(s.index).copied().unwrap_or_default();
    k.pacing.read_to(s.index, now, cur.next, s.write_idx, s.state == LATTE_SLOT_CLOSED, v.geo().samples_per_slot as u64);
    let key = (id.clone(), per_thread.then_some(s.os_tid));
    if k.owners.len() <= i {
        k.owners.resize(i + 1, None);
    }
    // The earlier owners' samples this read found unread (the slot got a
    // new owner since the last read): lost, in the series the slot's last
    // owner fed (or this owner's, when it had none here).
    if got.lost_before > 0 {
        let to = k.owners[i].clone().unwrap_or_else(|| key.clone());
        r.series.entry(to).or_default().lost += got.lost_before;
    }
    k.owners[i] = Some(key.clone());
    // A closed ring read to its end makes no series (again, once its
    // thread's has gone after --keep-gone).
    if buf.is_empty() && got.lost == 0 && s.state == LATTE_SLOT_CLOSED && !r.series.contains_key(&key) {
        return Ok(());
    }
    if !buf.is_empty() || got.lost > 0 {
        k.active_ns = now;
    }
    let series = r.series.entry(key).or_default();
    add_samples(series, buf, &k.buckets, k.cpn);
    series.lost += got.lost;
    // An open ring holds the series' (ID, thread): it has not ended (a
    // thread id used again within --keep-gone keeps its series).
    if s.state != LATTE_SLOT_CLOSED {
        series.ended = None;
    }
    Ok(())
}

/// Adds the samples read from one ring to its series: the bucket of each
/// (`buckets`), the sums in seconds, the switched ones apart.
fn add_samples(series: &mut Series, buf: &[latte_raw_sample], buckets: &Buckets, cpn: f64) {
    // Counted in four tallies by sample position, added up at the end:
    // samples of one ID mostly fall in one bucket, and one tally would make
    // each count wait for the one before (a store, then a load of it).
    let mut tally = [[0u64; FINITE_BUCKETS + 1]; LANES];
    let (mut cycles, mut switched_cycles) = (0u128, 0u128);
    for (j, x) in buf.iter().enumerate() {
        let d = x.packed & LATTE_MAX_DURATION;
        let k = buckets.of(d);
        cycles += d as u128;
        tally[j % LANES][k] += 1;
        if x.packed & latte::layout::LATTE_SAMPLE_SWITCHED != 0 {
            series.switched += 1;
            series.switched_buckets[k] += 1;
            switched_cycles += d as u128;
        }
    }
    for t in &tally {
        for (b, n) in series.buckets.iter_mut().zip(t) {
            *b += n;
        }
    }
    series.sum_seconds += cycles as f64 / cpn / 1e9;
    series.switched_sum_seconds += switched_cycles as f64 / cpn / 1e9;
}

/// Tallies `add_samples` counts in.
const LANES: usize = 4;

/// Step 5 with `--per-thread`: a thread's series ends when no open ring
/// holds its (ID, thread) any more: its ring was closed (and read to its
/// end by this pass), or handed to another thread before a pass saw it
/// closed.
fn end_series_of_released_threads(r: &mut Region, slots: &[latte::reader::latte_slot_info], names: &[Option<String>], now: Instant) {
    let open: HashSet<(&str, u32)> =
        slots.iter().filter(|s| s.state != LATTE_SLOT_CLOSED).filter_map(|s| Some((names.get(s.id_token as usize)?.as_deref()?, s.os_tid))).collect();
    for ((id, t), series) in r.series.iter_mut() {
        let held = t.is_some_and(|t| open.contains(&(id.as_str(), t)));
        series.ended = if held { None } else { series.ended.or(Some(now)) };
    }
}
