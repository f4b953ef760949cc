//! Sample statistics and the JSON row format of `fc-bench`.

use std::time::Instant;

use serde_json::{json, Value};

/// The `impl` field of every row this crate writes.
pub const IMPL: &str = "fc";

/// Microseconds from `t0` to `t1`.
#[inline]
pub fn us_since(t0: Instant, t1: Instant) -> f64 {
    t1.duration_since(t0).as_nanos() as f64 / 1e3
}

/// Linear interpolation between closest ranks (numpy's default); `v` sorted.
/// Same definition in raw_bench.c and torch_bench.py.
pub fn percentile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let pos = q * (v.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = (lo + 1).min(v.len() - 1);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

/// Median, 10th and 90th percentile of a set of samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// The median.
    pub median: f64,
    /// The 10th percentile.
    pub p10: f64,
    /// The 90th percentile.
    pub p90: f64,
    /// How many samples.
    pub n: usize,
}

impl Summary {
    /// Sorts `samples` in place and summarises them.
    pub fn of(samples: &mut [f64]) -> Summary {
        samples.sort_by(f64::total_cmp);
        Summary {
            median: percentile(samples, 0.5),
            p10: percentile(samples, 0.1),
            p90: percentile(samples, 0.9),
            n: samples.len(),
        }
    }
}

/// "debug" or "release": how this code was compiled.
pub fn build_kind() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

/// `x` rounded to `decimals` decimals (the rows' precision: 3 for
/// microseconds, 1 for rates), written by serde_json as the shortest
/// decimal that reads back the same.
pub fn round(x: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (x * scale).round() / scale
}

/// One JSON row of the common schema (see `bench/report.py`): `impl`,
/// `row`, `kernels`, the summary (`median_us`, `p10_us`, `p90_us` to the
/// nanosecond, `n`), `build`, then the fields of `extra` (a JSON object, in
/// its order; anything else adds nothing).
pub fn row_json(row: &str, kernels: usize, s: &Summary, extra: Value) -> String {
    let mut r = json!({
        "impl": IMPL, "row": row, "kernels": kernels,
        "median_us": round(s.median, 3), "p10_us": round(s.p10, 3), "p90_us": round(s.p90, 3), "n": s.n,
        "build": build_kind(),
    });
    if let (Some(map), Value::Object(more)) = (r.as_object_mut(), extra) {
        map.extend(more);
    }
    r.to_string()
}

/// No extra fields, for [`row_json`].
pub fn no_extra() -> Value {
    Value::Null
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate_like_numpy() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(percentile(&v, 0.5), 3.0);
        assert_eq!(percentile(&v, 0.1), 1.4);
        assert_eq!(percentile(&v, 1.0), 5.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
        assert_eq!(percentile(&[1.0, 2.0], 0.5), 1.5);
    }

    #[test]
    fn summary_sorts_and_counts() {
        let mut v = vec![5.0, 1.0, 4.0, 2.0, 3.0];
        let s = Summary::of(&mut v);
        assert_eq!(v, [1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!((s.median, s.n), (3.0, 5));
    }

    #[test]
    fn row_json_has_the_report_fields() {
        let s = Summary { median: 1.5, p10: 1.0, p90: 2.25, n: 7 };
        let row = row_json("step_x_fc", 26, &s, json!({"k": 1, "a": "x\"y"}));
        assert!(row.starts_with("{\"impl\":\"fc\",\"row\":\"step_x_fc\",\"kernels\":26,\"median_us\":1.5,"), "{row}");
        assert!(row.ends_with(&format!("\"n\":7,\"build\":\"{}\",\"k\":1,\"a\":\"x\\\"y\"}}", build_kind())), "{row}");
        let v: Value = serde_json::from_str(&row).expect("valid JSON");
        assert_eq!((v["p10_us"].as_f64(), v["p90_us"].as_f64()), (Some(1.0), Some(2.25)));
        let plain = row_json("r", 1, &Summary { median: 1.23456, p10: f64::NAN, p90: 2.0, n: 1 }, no_extra());
        let v: Value = serde_json::from_str(&plain).expect("valid JSON, NaN included");
        assert_eq!((v["median_us"].as_f64(), v["p10_us"].is_null()), (Some(1.235), true));
        assert!(plain.ends_with(&format!("\"build\":\"{}\"}}", build_kind())), "{plain}");
    }
}
