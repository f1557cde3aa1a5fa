//! The metrics the read passes added up, encoded in the OpenMetrics text
//! format by prometheus-client on each scrape (step 2 of the counting
//! protocol in `super`: a scrape never looks at a region).

use super::*;
use prometheus_client::collector::Collector;

/// A copy of the state's figures as a prometheus-client collector: what a
/// scrape encodes, taken under the state's lock and encoded after it is
/// released, so that the reading thread, which takes the lock to read a
/// ring every fraction of a millisecond, never waits for an encoding.
pub struct Metrics(Shown);

impl Metrics {
    /// The figures of `state` as they stand.
    pub fn of(state: &State) -> Metrics {
        Metrics(Shown { split_switched: state.opts.split_switched, regions: state.regions.clone(), stalled: state.stalled })
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("latte regions")
    }
}

impl Collector for Metrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        self.0.encode(&mut enc)
    }
}

/// The regions' figures as they stood when copied (their mappings left
/// out).
struct Shown {
    split_switched: bool,
    regions: BTreeMap<Vec<u8>, Region>,
    stalled: Duration,
}

/// The regions with their label (the name without its leading '/').
type Labelled<'a> = Vec<(String, &'a Region)>;

/// The labels of one series.
fn series_labels(region: &str, id: &str, t: Option<u32>) -> Vec<(&'static str, String)> {
    let mut l = vec![("region", region.to_string())];
    if id == FOLDED {
        l.push(("folded", "true".to_string()));
    } else {
        l.push(("id", id.to_string()));
    }
    if let Some(t) = t {
        l.push(("thread", t.to_string()));
    }
    l
}

/// A per-region figure: its name, help, type and value.
type PerRegion = (&'static str, &'static str, MetricType, fn(&Region) -> u64);

/// The figures exported once per region, in this order.
const PER_REGION: [PerRegion; 13] = [
    ("latte_ids_folded", "IDs past latte serve's --max-ids, whose samples are in the series with folded=\"true\" (and no id label)", MetricType::Gauge, |r| {
        r.ids_folded
    }),
    (
        "latte_switches_tracked",
        "1 when the producer tracks switches (its samples switched out are flagged, latte_samples_switched_total is exported), else 0",
        MetricType::Gauge,
        |r| r.switches_tracked as u64,
    ),
    (
        "latte_samples_unseen",
        "Samples recorded by regions of this name that the exporter never saw (each replaced before a pass found it), from the producers' own counts",
        MetricType::Counter,
        |r| r.unseen_samples,
    ),
    ("latte_regions_unseen", "Regions of this name (producer incarnations) the exporter never saw", MetricType::Counter, |r| r.unseen_regions),
    ("latte_slot_reuses", "Rings of exited threads given to new (thread, ID) pairs", MetricType::Counter, |r| r.counts.0[COUNT_REUSES]),
    (
        "latte_slot_reuse_discarded_samples",
        "Samples still in rings when they were reused (what the exporter had not read of them is in latte_samples_lost_total)",
        MetricType::Counter,
        |r| r.counts.0[COUNT_REUSE_DISCARDED],
    ),
    (
        "latte_ring_early_laps",
        "Rings that started over at index 0 before their end because their memory could not grow (the budget or the filesystem reached); what they overwrote is in latte_samples_lost_total",
        MetricType::Counter,
        |r| r.counts.0[COUNT_EARLY_LAPS],
    ),
    ("latte_ring_memory_bytes", "Bytes of ring memory the producer has committed (rings take memory as they are written)", MetricType::Gauge, |r| {
        r.ring_bytes
    }),
    ("latte_producer_up", "1 while the region's producer runs (holds its liveness lock), else 0", MetricType::Gauge, |r| r.alive as u64),
    ("latte_producer", "The producer's process id", MetricType::Info, |r| r.pid as u64),
    ("latte_calibrated", "1 when durations are converted with the producer's cycles per ns, 0 with the exporter's own measurement", MetricType::Gauge, |r| {
        r.calibrated as u64
    }),
    ("latte_slots_used", "Rings handed out in the region", MetricType::Gauge, |r| r.slots_used as u64),
    ("latte_slots_capacity", "Rings the region has", MetricType::Gauge, |r| r.slot_capacity as u64),
];

impl Shown {
    /// Encodes every metric (a scrape).
    pub fn encode(&self, enc: &mut DescriptorEncoder) -> std::fmt::Result {
        // Two names that show as the same text (bytes that are not UTF-8,
        // shown as \xNN) would make duplicate series: the second is left out.
        let mut shown = HashSet::new();
        let regions: Labelled = self
            .regions
            .iter()
            .filter_map(|(n, r)| {
                let label = label_text(n.strip_prefix(b"/").unwrap_or(n));
                shown.insert(label.clone()).then_some((label, r))
            })
            .collect();
        let seen: Labelled = regions.iter().filter(|(_, r)| r.seen).map(|(l, r)| (l.clone(), *r)).collect();
        self.encode_histograms(enc, &seen)?;
        encode_series_counters(enc, &seen)?;
        encode_drops(enc, &seen)?;
        for (name, help, kind, value) in PER_REGION {
            let mut m = enc.encode_descriptor(name, help, None, kind)?;
            for (region, r) in &seen {
                let labels = [("region", region.as_str())];
                match kind {
                    MetricType::Counter => m.encode_family(&labels)?.encode_counter::<NoLabelSet, u64, u64>(&value(r), None)?,
                    MetricType::Info => m.encode_family(&labels)?.encode_info(&[("pid", value(r).to_string().as_str())])?,
                    _ => m.encode_family(&labels)?.encode_gauge(&(value(r) as i64))?,
                }
            }
        }
        // The budget only where there is one: unlimited is not a number.
        let mut m = enc.encode_descriptor(
            "latte_ring_memory_budget_bytes",
            "Bytes of ring memory the producer may commit (LATTE_BUDGET_MIB; past it rings stop growing and lap early); not exported for a region without a budget",
            None,
            MetricType::Gauge,
        )?;
        for (region, r) in &seen {
            if let Some(b) = r.ring_budget {
                m.encode_family(&[("region", region.as_str())])?.encode_gauge(&(b.min(i64::MAX as u64) as i64))?;
            }
        }
        let mut m = enc.encode_descriptor(
            "latte_serve_read_errors",
            "Reads of a mapped region that failed (the object is corrupt or shrank)",
            None,
            MetricType::Counter,
        )?;
        for (region, r) in &seen {
            m.encode_family(&[("region", region.as_str())])?.encode_counter::<NoLabelSet, u64, u64>(&r.read_errors, None)?;
        }
        enc.encode_descriptor(
            "latte_serve_reader_stalled",
            "Time the reading thread was kept off its CPU (waiting on the run queue or woken late), over the stretches where that was more than 1 ms: time a busy ring may have lapped (its loss is in latte_samples_lost_total)",
            Some(&Unit::Seconds),
            MetricType::Counter,
        )?
        .encode_counter::<NoLabelSet, f64, u64>(&self.stalled.as_secs_f64(), None)?;
        let mut m =
            enc.encode_descriptor("latte_serve_region_unreadable", "1 for a region name whose object cannot be opened, with why", None, MetricType::Gauge)?;
        for (region, r) in &regions {
            if let Some(why) = &r.unreadable {
                m.encode_family(&[("region", region.as_str()), ("reason", why.as_str())])?.encode_gauge(&1i64)?;
            }
        }
        Ok(())
    }

    /// The duration histogram of every series (in two halves by
    /// `switched` with `--split-switched`).
    fn encode_histograms(&self, enc: &mut DescriptorEncoder, seen: &Labelled) -> std::fmt::Result {
        let mut m = enc.encode_descriptor(
            "latte_span_duration",
            if self.split_switched {
                "Span durations (raw, calibration overheads included) read since the exporter began watching the region; buckets 4 ns * 2^(k/2); switched=\"true\": samples whose thread was switched out during them"
            } else {
                "Span durations (raw, calibration overheads included) read since the exporter began watching the region; buckets 4 ns * 2^(k/2)"
            },
            Some(&Unit::Seconds),
            MetricType::Histogram,
        )?;
        let mut buckets: Vec<(f64, u64)> = Vec::with_capacity(FINITE_BUCKETS + 1);
        for (region, r) in seen {
            for ((id, t), s) in &r.series {
                let labels = series_labels(region, id, *t);
                // (label, per-bucket counts, sum): all samples, or the two
                // halves by `switched`.
                let parts: Vec<(Option<&str>, [u64; FINITE_BUCKETS + 1], f64)> = if self.split_switched && r.switches_tracked {
                    let not: [u64; FINITE_BUCKETS + 1] = std::array::from_fn(|k| s.buckets[k] - s.switched_buckets[k]);
                    vec![(Some("false"), not, (s.sum_seconds - s.switched_sum_seconds).max(0.0)), (Some("true"), s.switched_buckets, s.switched_sum_seconds)]
                } else {
                    vec![(None, s.buckets, s.sum_seconds)]
                };
                for (label, counts, sum) in parts {
                    buckets.clear();
                    buckets.extend((0..FINITE_BUCKETS).map(|k| (bound_ns(k) / 1e9, counts[k])));
                    buckets.push((f64::INFINITY, counts[FINITE_BUCKETS]));
                    let mut l = labels.clone();
                    if let Some(v) = label {
                        l.push(("switched", v.to_string()));
                    }
                    m.encode_family(&l)?.encode_histogram::<NoLabelSet>(sum, counts.iter().sum(), &buckets, None)?;
                }
            }
        }
        Ok(())
    }
}

/// The sample counters of every series: one descriptor each, one value per
/// series.
fn encode_series_counters(enc: &mut DescriptorEncoder, seen: &Labelled) -> std::fmt::Result {
    type PerSeries = fn(&Series) -> u64;
    let counters: [(&str, &str, PerSeries); 3] = [
        ("latte_samples_recorded", "Samples the producer recorded since the exporter began watching (read, in the histogram's count, plus lost)", |s| {
            s.count() + s.lost
        }),
        ("latte_samples_lost", "Samples overwritten in their ring before the exporter read them", |s| s.lost),
        ("latte_samples_switched", "Samples read whose thread was switched out during them (exported for producers that track switches only)", |s| s.switched),
    ];
    for (name, help, value) in counters {
        let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
        // The switched count only where switches are tracked.
        for (region, r) in seen.iter().filter(|(_, r)| name != "latte_samples_switched" || r.switches_tracked) {
            for ((id, t), s) in &r.series {
                m.encode_family(&series_labels(region, id, *t))?.encode_counter::<NoLabelSet, u64, u64>(&value(s), None)?;
            }
        }
    }
    Ok(())
}

/// The producers' drop counters, by reason.
fn encode_drops(enc: &mut DescriptorEncoder, seen: &Labelled) -> std::fmt::Result {
    let mut m = enc.encode_descriptor(
        "latte_spans_dropped",
        "Spans the producer did not record, by reason (overflow_start: 64 spans open; orphan_stop: stop with none open; unfit_id: the ID could not be stored; no_slot: no ring to be had; late: after the thread's recorder was torn down), since the exporter began watching",
        None,
        MetricType::Counter,
    )?;
    for (region, r) in seen {
        for (k, reason) in DROP_REASONS.iter().enumerate() {
            let labels = [("region", region.as_str()), ("reason", reason)];
            m.encode_family(&labels)?.encode_counter::<NoLabelSet, u64, u64>(&r.counts.0[k], None)?;
        }
    }
    Ok(())
}
