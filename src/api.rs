//! The Rust face: recording and reporting for Rust callers, over the same
//! engine, rings and report as the C and C++ faces.

use crate::error::Error;
use crate::layout::*;
use crate::reader::Calibration;
use crate::report::{render_classic, rows_of_view};

/// This process's report, the text of the original Latte's `DumpToStream`:
/// one row per ID. Calibrates first (a few milliseconds, on the calling
/// thread) when times or calibrated figures are asked.
pub fn own_report(unit: latte_unit, data: latte_data) -> Result<String, Error> {
    if unit == LATTE_UNIT_TIME || data == LATTE_DATA_CALIBRATED {
        // A calibration that fails leaves the overheads at 0: the report
        // then shows the figures uncorrected, which it says.
        let _ = crate::calibrate::run_native();
    }
    let view = match crate::extract::own_view() {
        Some(v) => v,
        None => return Ok(render_classic(&[], unit, data, &Calibration::default())),
    };
    let cal = view.calibration();
    Ok(render_classic(&rows_of_view(&view, data, &cal)?, unit, data, &cal))
}
