/*
 * latte_disable.h: what latte.h provides when LATTE_DISABLE is defined
 * before it is included. Hand-written (not generated); latte.h includes it
 * from its trailer.
 *
 * Every entry point keeps its call syntax and compiles to a no-op that
 * references no latte symbol, so the program links without liblatte.
 * Recording, region and flush calls "succeed" doing nothing (0); output
 * parameters are set to empty (counts 0, zeroed structs, empty strings);
 * calls that would hand out an object (a reader) return
 * LATTE_ERR_NOT_SUPPORTED and set it to NULL; string getters return "".
 */
#ifndef LATTE_DISABLE_H
#define LATTE_DISABLE_H

#include <errno.h>
#include <string.h>

/* Each helper takes the sizes of the ignored arguments, so that every
 * argument is "used" without being evaluated. */
static inline int latte__off_int(size_t ignored) { (void)ignored; return 0; }
static inline uint32_t latte__off_u32(size_t ignored, uint32_t v) { (void)ignored; return v; }
static inline uint64_t latte__off_u64(size_t ignored) { (void)ignored; return 0; }
static inline double latte__off_f64(size_t ignored) { (void)ignored; return 0.0; }
static inline char *latte__off_string(size_t ignored) { (void)ignored; return (char *)0; }
static inline const char *latte__off_cstr(size_t ignored) { (void)ignored; return ""; }
static inline void latte__off_void(size_t ignored) { (void)ignored; }
static inline int latte__off_count(size_t ignored, size_t *out_n) {
  (void)ignored;
  if (out_n) *out_n = 0;
  return 0;
}
static inline int latte__off_str(size_t ignored, char *buf, size_t len) {
  (void)ignored;
  if (buf && len) buf[0] = 0;
  return 0;
}
static inline int latte__off_zero(size_t ignored, void *p, size_t n) {
  (void)ignored;
  if (p) memset(p, 0, n);
  return 0;
}
static inline int latte__off_clean(size_t ignored, size_t *kept, size_t *outliers, double *cutoff, int *has) {
  (void)ignored;
  if (kept) *kept = 0;
  if (outliers) *outliers = 0;
  if (cutoff) *cutoff = 0;
  if (has) *has = 0;
  return 0;
}
static inline int latte__off_err_zero(size_t ignored, void *p, size_t n, int err) {
  (void)ignored;
  if (p) memset(p, 0, n);
  return err;
}
static inline int latte__off_fmt(size_t ignored, char *buf, size_t cap, size_t *out_n) {
  (void)ignored;
  if (out_n) *out_n = 0;
  if (!buf || !cap) return -ERANGE;
  buf[0] = 0;
  return 0;
}
static inline int latte__off_reader(size_t ignored, struct latte_reader **out) {
  (void)ignored;
  if (out) *out = 0;
  return LATTE_ERR_NOT_SUPPORTED;
}

#define latte_start(id, mode) latte__off_void(sizeof(id) + sizeof(mode))
#define latte_stop(id, mode) latte__off_u64(sizeof(id) + sizeof(mode))
#define latte_pulse(site, id) latte__off_void(sizeof(site) + sizeof(id))
#define latte_thread_prefault(id) ((int64_t)latte__off_int(sizeof(id)))
#define latte_internal_thread_resolve_v3(t, id) ((uint64_t)latte__off_u64(sizeof(t) + sizeof(id)))
#define latte_internal_thread_note_overflow_v3(t) latte__off_void(sizeof(t))
#define latte_internal_thread_promote_v3(t, id, at) latte__off_void(sizeof(t) + sizeof(id) + sizeof(at))
#define latte_internal_thread_stop_slow_v3(t, mode, now) latte__off_u64(sizeof(t) + sizeof(mode) + sizeof(now))
#define latte_internal_thread_pulse_slow_v3(t, site, id, now) latte__off_void(sizeof(t) + sizeof(site) + sizeof(id) + sizeof(now))
#define latte_internal_ring_write_at_limit_v3(s, mask, idx, tsc, packed) \
  latte__off_u64(sizeof(s) + sizeof(mask) + sizeof(idx) + sizeof(tsc) + sizeof(packed))
#define latte_thread_get_counters(out) latte__off_zero(0, (out), sizeof(struct latte_thread_counters))
#define latte_region_get_counters(out) latte__off_zero(0, (out), sizeof(struct latte_counters))
#define latte_intern_id(id) latte__off_u32(sizeof(id), LATTE_INVALID_ID)
#define latte_id_name(token, buf, len) latte__off_str(sizeof(token), (buf), (len))
#define latte_samples_snapshot(id, out, cap, out_n) latte__off_count(sizeof(id) + sizeof(out) + sizeof(cap), (out_n))
#define latte_samples_extract(out, cap, out_n) latte__off_count(sizeof(out) + sizeof(cap), (out_n))
#define latte_samples_extract_some(out, cap, out_n, missed) latte__off_count(sizeof(out) + sizeof(cap) + (size_t)((*(missed) = 0), 0), (out_n))
#define latte_id_key(token) ((const char *)latte__off_string(sizeof(token)))
#define latte_tsc_epoch() latte__off_u64(0)
#define latte_report_string(unit, data) latte__off_string(sizeof(unit) + sizeof(data))
#define latte_report_string_color(unit, data) latte__off_string(sizeof(unit) + sizeof(data))
#define latte_string_free(s) latte__off_void(sizeof(s))
#define latte_trace_write(path) latte__off_int(sizeof(path))
#define latte_time_format(ns, buf, len) latte__off_str(sizeof(ns), (buf), (len))
#define latte_samples_clean(v, n, ov, kept, outl, cut, has) latte__off_clean(sizeof(v) + sizeof(n) + sizeof(ov), (kept), (outl), (cut), (has))
#define latte_calibration_run() latte__off_int(0)
#define latte_calibration_begin() latte__off_int(0)
#define latte_calibration_end() latte__off_int(0)
#define latte_calibration_iterations() latte__off_u32(0, 0)
#define latte_calibration_id() latte__off_cstr(0)
#define latte_calibration_get_overheads(out9, pulse) latte__off_int(sizeof(out9) + sizeof(pulse))
#define latte_tsc_cycles_per_ns() latte__off_f64(0)
#define latte_tsc_measure_cycles_per_ns(ms) latte__off_f64(sizeof(ms))
#define latte_error_string(code) latte__off_cstr(sizeof(code))
#define latte_version() LATTE_VERSION_STRING
#define latte_init_shared_region(name) latte__off_int(sizeof(name))
#define latte_init_shared_region_with(name, cfg) latte__off_int(sizeof(name) + sizeof(cfg))
#define latte_flush_async(fd, unit) latte__off_int(sizeof(fd) + sizeof(unit))
#define latte_poll_flush() latte__off_int(0)
#define latte_flush_cancel() latte__off_int(0)
#define latte_flush_get_status(out) latte__off_zero(0, (out), sizeof(struct latte_flush_status))
#define latte_flush_sync(fd, unit) latte__off_int(sizeof(fd) + sizeof(unit))
#define latte_flush_supported() latte__off_int(0)
#define latte_reader_open(name, out) latte__off_reader(sizeof(name), (out))
#define latte_reader_open_file(path, out) latte__off_reader(sizeof(path), (out))
#define latte_reader_close(r) latte__off_void(sizeof(r))
#define latte_reader_set_min_interval(r, ns) latte__off_int(sizeof(r) + sizeof(ns))
#define latte_reader_refresh(r) latte__off_int(sizeof(r))
#define latte_reader_id_count(r) latte__off_u32(sizeof(r), 0)
#define latte_reader_id_name(r, token, buf, len) latte__off_str(sizeof(r) + sizeof(token), (buf), (len))
#define latte_reader_id_is_reserved(r, token) latte__off_int(sizeof(r) + sizeof(token))
#define latte_reader_slots(r, out, cap, out_n) latte__off_count(sizeof(r) + sizeof(out) + sizeof(cap), (out_n))
#define latte_reader_read(r, slot, cur, out, cap, out_n) latte__off_count(sizeof(r) + sizeof(slot) + sizeof(cur) + sizeof(out) + sizeof(cap), (out_n))
#define latte_reader_get_counters(r, out) latte__off_zero(sizeof(r), (out), sizeof(struct latte_counters))
#define latte_reader_get_info(r, out) latte__off_zero(sizeof(r), (out), sizeof(struct latte_region_info))
#define latte_region_unlink(name) latte__off_int(sizeof(name))

/* Switch tracking is not there: enabling it says so; points and deltas are
 * refused as with tracking off. */
#define latte_sched_enable() (latte__off_int(0) + LATTE_ERR_NOT_SUPPORTED)
#define latte_sched_release() latte__off_int(0)
#define latte_sched_status() latte__off_int(0)
#define latte_sched_get_counters(out) latte__off_zero(0, (out), sizeof(struct latte_sched_counters))
#define latte_sched_snap(out) latte__off_err_zero(0, (out), sizeof(struct latte_sched_point), LATTE_ERR_SCHED_OFF)
#define latte_sched_diff(a, b, out) latte__off_err_zero(sizeof(a) + sizeof(b), (out), sizeof(struct latte_sched_delta), LATTE_ERR_SCHED_OFF)
#define latte_sched_format(d, buf, cap, out_n) latte__off_fmt(sizeof(d), (buf), (cap), (out_n))

#endif /* LATTE_DISABLE_H */
