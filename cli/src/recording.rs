//! The recording file written by `latte record` (docs/recording.md).
//!
//! A recording is a flushed image (the region's own layout, magic
//! `LATTEREG`, `LATTE_REGION_FLUSHED`) followed by a trailer, so that every
//! reader of an image (`latte stats`, `trace`, `latte_reader_open_file`)
//! opens it as it is. Its slot chunks are laid out one after the other as
//! the slots fill (chunk `k` of `FILE_FIRST_SLOTS << k` slots), then one
//! chunk of name records per `LATTE_FIRST_NAME_BYTES << k` bytes needed.
//! Each slot of the file holds up to one ring's worth of
//! consecutive samples that one owner (thread, ID) wrote: an owner followed
//! for longer than a ring fills several slots, in order (interleaved with
//! other owners' slots), each closed, its `write_idx` and
//! `flushed_end_idx` the number of samples it holds. A file
//! slot's generation is the 1-based number of the followed incarnation it
//! belongs to, in the trailer's `incarnations` list.
//!
//! The trailer, after the image's `total_size` bytes: a JSON document
//! (format, version, what was followed, and per incarnation the samples
//! recorded, read and lost), its length as 8 bytes little-endian, then the
//! 8 bytes `LATTEREC`. The file header is written last: a file cut short
//! has no magic and never passes for a recording.

use latte::counters::latte_counters;
use latte::layout::*;
use latte::reader::{latte_raw_sample, View, RECORDING_MAGIC};
use std::fs::File;
use std::os::unix::fs::FileExt;

/// Slots of the file's first slot chunk; chunk `k` holds `<< k`.
const FILE_FIRST_SLOTS: u32 = 16;

/// What the header of one file slot says: whose samples it holds, and how
/// many.
#[derive(Clone, Copy)]
struct FileSlot {
    /// The 1-based number of the followed incarnation.
    generation: u32,
    id_token: u32,
    thread_idx: u32,
    os_tid: u32,
    /// Samples the slot holds (its `write_idx` and `flushed_end_idx`).
    held: u64,
}

/// Writes a recording: samples as they come, the headers and the trailer at
/// the end.
pub struct Writer {
    file: File,
    geo: Geometry,
    /// File offset of each slot chunk made so far.
    chunks: Vec<u64>,
    /// The file's first free page-aligned offset.
    end: u64,
    /// Slot headers to write at the end, one per file slot, in file order.
    headers: Vec<FileSlot>,
    /// Per incarnation number: its last file slot (index into `headers`).
    open: std::collections::HashMap<u32, usize>,
}

fn put(buf: &mut [u8], off: usize, bytes: &[u8]) {
    buf[off..off + bytes.len()].copy_from_slice(bytes);
}

fn other(text: &str) -> std::io::Error {
    std::io::Error::other(text.to_string())
}

impl Writer {
    /// A writer of slots of `samples_per_slot` samples (the followed
    /// region's).
    pub fn create(file: File, samples_per_slot: u32) -> std::io::Result<Writer> {
        let geo = Geometry::new(FILE_FIRST_SLOTS, samples_per_slot).ok_or_else(|| other("unusable geometry"))?;
        Ok(Writer { file, geo, chunks: Vec::new(), end: LATTE_PAGE_SIZE, headers: Vec::new(), open: Default::default() })
    }

    /// File offset of slot `i`, making its chunk when it is the next one.
    fn slot_offset(&mut self, i: u32) -> std::io::Result<u64> {
        let (k, j) = self.geo.slot_place(i);
        while self.chunks.len() <= k as usize {
            let bytes = self.geo.slot_chunk_bytes(self.chunks.len() as u32).ok_or_else(|| other("too many slots"))?;
            self.chunks.push(self.end);
            self.end += bytes;
        }
        Ok(self.chunks[k as usize] + j * self.geo.slot_stride)
    }

    /// Appends `samples` of incarnation number `generation` (1-based) to
    /// the file: into its current file slot while it has room, then into
    /// new ones. Written where they belong at once (no copy in between).
    pub fn append(&mut self, generation: u32, id_token: u32, thread_idx: u32, os_tid: u32, mut samples: &[latte_raw_sample]) -> std::io::Result<()> {
        let cap = self.geo.samples_per_slot as u64;
        while !samples.is_empty() {
            let k = match self.open.get(&generation) {
                Some(&k) if self.headers[k].held < cap => k,
                _ => {
                    self.headers.push(FileSlot { generation, id_token, thread_idx, os_tid, held: 0 });
                    self.open.insert(generation, self.headers.len() - 1);
                    self.headers.len() - 1
                }
            };
            let held = self.headers[k].held;
            let n = samples.len().min((cap - held) as usize);
            let off = self.slot_offset(k as u32)? + LATTE_SLOT_HEADER_SIZE as u64 + held * LATTE_SAMPLE_SIZE as u64;
            // The file's samples are the region's: two little-endian u64 words.
            // SAFETY: latte_raw_sample is repr(C), two u64 (16 bytes, no
            // padding, every byte initialised); the byte view borrows
            // `samples` for this call only; x86-64 (the only target) is
            // little-endian.
            let bytes = unsafe { core::slice::from_raw_parts(samples.as_ptr() as *const u8, core::mem::size_of_val(&samples[..n])) };
            self.file.write_all_at(bytes, off)?;
            self.headers[k].held += n as u64;
            samples = &samples[n..];
        }
        Ok(())
    }

    /// Writes the slot headers, the name records, the trailer and, last,
    /// the file header (copied from `view`'s: calibration, anchors,
    /// counters).
    pub fn finish(mut self, view: &View, trailer: &serde_json::Value) -> std::io::Result<u64> {
        let slots = self.headers.len() as u32;
        if slots == 0 {
            self.slot_offset(0)?; // one empty chunk: a region has slots
        }
        self.write_slot_headers()?;
        let ids = view.ids().map_err(|e| other(&e.to_string()))?;
        let name_chunks = self.write_names(&ids)?;
        let total = self.end;
        // The trailer after the image; the file is cut to its end.
        let mut tail = serde_json::to_vec(trailer).map_err(std::io::Error::other)?;
        tail.extend_from_slice(&(tail.len() as u64).to_le_bytes());
        tail.extend_from_slice(&RECORDING_MAGIC);
        self.file.set_len(total)?;
        self.file.write_all_at(&tail, total)?;
        let h = self.file_header(view, ids.len() as u32, slots, &name_chunks);
        self.file.write_all_at(&h, 0)?;
        self.file.sync_data()?;
        // The magic last: before it, the file is not an image.
        self.file.write_all_at(&LATTE_MAGIC, 0)?;
        Ok(total + tail.len() as u64)
    }

    /// Every slot's header: its incarnation's owner, closed, its write
    /// index at the samples written.
    fn write_slot_headers(&mut self) -> std::io::Result<()> {
        use core::mem::offset_of as o;
        type S = latte_slot_header;
        for (k, h) in self.headers.clone().iter().enumerate() {
            let mut b = [0u8; LATTE_SLOT_HEADER_SIZE as usize];
            put(&mut b, o!(S, write_idx), &h.held.to_le_bytes());
            put(&mut b, o!(S, flushed_end_idx), &h.held.to_le_bytes());
            put(&mut b, o!(S, generation), &h.generation.to_le_bytes());
            put(&mut b, o!(S, id_token), &h.id_token.to_le_bytes());
            put(&mut b, o!(S, thread_idx), &h.thread_idx.to_le_bytes());
            put(&mut b, o!(S, os_tid), &h.os_tid.to_le_bytes());
            put(&mut b, o!(S, state), &LATTE_SLOT_CLOSED.to_le_bytes());
            let off = self.slot_offset(k as u32)?;
            self.file.write_all_at(&b, off)?;
        }
        Ok(())
    }

    /// The name records in token order, chunk after chunk; the chunks'
    /// offsets.
    fn write_names(&mut self, ids: &[latte::reader::IdInfo]) -> std::io::Result<Vec<u64>> {
        let mut name_chunks: Vec<u64> = Vec::new();
        let mut chunk: Vec<u8> = Vec::new();
        let flush_chunk = |w: &mut Writer, chunk: &mut Vec<u8>, dirs: &mut Vec<u64>| -> std::io::Result<()> {
            let off = w.end;
            w.file.write_all_at(chunk, off)?;
            dirs.push(off);
            w.end += name_chunk_bytes(dirs.len() as u32 - 1);
            chunk.clear();
            Ok(())
        };
        for id in ids {
            let len = id.name.len() as u64;
            let rec = name_record_bytes(len) as usize;
            if chunk.len() + rec > name_chunk_bytes(name_chunks.len() as u32) as usize {
                flush_chunk(self, &mut chunk, &mut name_chunks)?;
            }
            chunk.extend_from_slice(&(len as u32 + 1).to_le_bytes());
            chunk.extend_from_slice(&id.name);
            chunk.resize(chunk.len().next_multiple_of(LATTE_NAME_ALIGN as usize), 0);
        }
        flush_chunk(self, &mut chunk, &mut name_chunks)?;
        Ok(name_chunks)
    }

    /// The image's header: the layout, the region's anchors, calibration
    /// and counters, and the chunk directories of what was written.
    fn file_header(&self, view: &View, ids_used: u32, slots: u32, name_chunks: &[u64]) -> [u8; LATTE_HEADER_SIZE as usize] {
        use core::mem::offset_of as o;
        type H = latte_region_header;
        let cal = view.calibration();
        let c: latte_counters = view.counters();
        let mut h = [0u8; LATTE_HEADER_SIZE as usize];
        put(&mut h, o!(H, version), &LATTE_LAYOUT_VERSION.to_le_bytes());
        put(&mut h, o!(H, header_size), &LATTE_HEADER_SIZE.to_le_bytes());
        put(&mut h, o!(H, slot_header_size), &LATTE_SLOT_HEADER_SIZE.to_le_bytes());
        put(&mut h, o!(H, sample_size), &LATTE_SAMPLE_SIZE.to_le_bytes());
        put(&mut h, o!(H, first_slots), &self.geo.first_slots.to_le_bytes());
        put(&mut h, o!(H, samples_per_slot), &self.geo.samples_per_slot.to_le_bytes());
        put(&mut h, o!(H, first_name_bytes), &LATTE_FIRST_NAME_BYTES.to_le_bytes());
        put(&mut h, o!(H, slot_stride), &self.geo.slot_stride.to_le_bytes());
        put(&mut h, o!(H, total_size), &self.end.to_le_bytes());
        put(&mut h, o!(H, producer_pid), &view.producer_pid().to_le_bytes());
        put(&mut h, o!(H, flags), &LATTE_REGION_FLUSHED.to_le_bytes());
        put(&mut h, o!(H, anchor_tsc), &view.anchor_tsc().to_le_bytes());
        put(&mut h, o!(H, anchor_realtime_ns), &view.anchor_realtime_ns().to_le_bytes());
        put(&mut h, o!(H, ids_used), &ids_used.to_le_bytes());
        put(&mut h, o!(H, slots_used), &slots.to_le_bytes());
        put(&mut h, o!(H, threads_seen), &c.threads_seen.to_le_bytes());
        put(&mut h, o!(H, cycles_per_ns_bits), &cal.cycles_per_ns.to_bits().to_le_bytes());
        // Done: the figures below are the producer's.
        let state = if cal.calibrated { LATTE_CALIBRATION_DONE } else { LATTE_CALIBRATION_NONE };
        put(&mut h, o!(H, calibration_state), &state.to_le_bytes());
        put(&mut h, o!(H, display_unit), &view.display_unit().to_le_bytes());
        for k in 0..LATTE_MODE_PAIRS as usize {
            put(&mut h, o!(H, overhead_bits) + k * size_of::<u64>(), &cal.overhead[k].to_bits().to_le_bytes());
        }
        put(&mut h, o!(H, pulse_overhead_bits), &cal.pulse().to_bits().to_le_bytes());
        put(&mut h, o!(H, overflow_starts), &c.overflow_starts.to_le_bytes());
        put(&mut h, o!(H, orphan_stops), &c.orphan_stops.to_le_bytes());
        put(&mut h, o!(H, unfit_id_drops), &c.unfit_id_drops.to_le_bytes());
        put(&mut h, o!(H, no_slot_drops), &c.no_slot_drops.to_le_bytes());
        put(&mut h, o!(H, slot_reuses), &c.slot_reuses.to_le_bytes());
        put(&mut h, o!(H, reuse_discarded), &c.reuse_discarded.to_le_bytes());
        put(&mut h, o!(H, late_drops), &c.late_drops.to_le_bytes());
        for (k, off) in self.chunks.iter().enumerate() {
            put(&mut h, o!(H, slot_chunks) + k * size_of::<u64>(), &off.to_le_bytes());
        }
        for (k, off) in name_chunks.iter().enumerate() {
            put(&mut h, o!(H, name_chunks) + k * size_of::<u64>(), &off.to_le_bytes());
        }
        h
    }
}

/// Adds to each row of a recording's report the samples its followed rings
/// lost (the image's own slots hold only what was read, so they count
/// none). Nothing for a region or an image.
pub fn add_lost(m: &latte::Mapping, rows: &mut [latte::report::Row]) -> Result<(), String> {
    let Some(rec) = m.recording().map_err(trailer_error)? else { return Ok(()) };
    let lost = rec.lost_by_token(None);
    for r in rows.iter_mut() {
        r.lost = r.lost.saturating_add(lost.get(r.token as usize).copied().unwrap_or(0));
    }
    Ok(())
}

/// What a damaged or unknown trailer is called (`Mapping::recording`'s
/// error).
pub fn trailer_error(e: latte::Error) -> String {
    format!("its recording trailer: {}", crate::exit::strerror(e))
}
