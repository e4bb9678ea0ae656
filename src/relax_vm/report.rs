//! `runtime.profiling.Report` as far as TVM's Python reads one: a report built from the JSON a
//! profiler returns (`FromJSON`), printed back as JSON, as a table and as CSV. The Relax VM's
//! `profile` (and the graph debug executor's `profile_rpc`) hand their reports to Python this
//! way.

use super::bytecode::{owned, push};
use crate::object::ObjectRef;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::json::{self, Map, Value};
use crate::packed_func::registry::Registrar;
use crate::packed_func::value::RetValue;

/// A profiling report, kept as its JSON.
pub struct ReportObj {
    json: Value,
}

// SAFETY: `ReportObj` is the payload stored under this key only (a type of its own).
unsafe impl crate::object::ObjectType for ReportObj {
    crate::object_type!("runtime.profiling.Report", parent 0);
}

/// Field `key` of an object value.
#[inline(never)]
fn field<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.as_object()?.get(key)
}

/// The printable value of one metric (`{"microseconds": x}`, `{"count": n}`, ...).
#[inline(never)]
fn metric_text(v: &Value) -> String {
    for unit in ["microseconds", "percent", "ratio"] {
        if let Some(x) = number(v, unit) {
            return format!("{x:.2}");
        }
    }
    if let Some(x) = field(v, "count") {
        return x.to_string();
    }
    if let Some(x) = field(v, "string").and_then(Value::as_str) {
        return owned(x);
    }
    v.to_string()
}

#[inline(never)]
fn number(v: &Value, key: &str) -> Option<f64> {
    field(v, key)?.as_f64()
}

/// The units summed by [`sum_rows`], the last one an integer.
const SUMMED: [&str; 3] = ["microseconds", "percent", "count"];

type Row = Map;

/// `{unit: x}`, a metric.
#[inline(never)]
pub(crate) fn metric(unit: &str, x: Value) -> Value {
    let mut m = Map::new();
    m.insert(owned(unit), x);
    Value::Object(m)
}

/// Sets `key` of a row (one out-of-line copy of the map's insertion).
#[inline(never)]
pub(crate) fn set(row: &mut Row, key: &str, v: Value) {
    row.insert(owned(key), v);
}

/// The entries of a row or object, in key order (one out-of-line copy of the map's walk).
#[inline(never)]
fn entries(m: &Row) -> Vec<(&String, &Value)> {
    m.iter().collect()
}

/// Row `r` named `name` (its `Name` column the string `name`).
#[inline(never)]
fn named(mut r: Row, name: &str) -> Row {
    set(&mut r, "Name", metric("string", Value::from(name)));
    r
}

/// The text of column `key` of a row (empty where the row has none).
#[inline(never)]
fn cell(r: &Row, key: &str) -> String {
    r.get(key).map(metric_text).unwrap_or_default()
}

/// Adds `v`'s metric `unit` (if it has one) to column `k` of `out`.
#[inline(never)]
fn add_metric(out: &mut Row, k: &str, v: &Value, unit: &str) {
    if let Some(x) = number(v, unit) {
        let prev = out.get(k).and_then(|p| number(p, unit)).unwrap_or(0.0);
        let total = prev + x;
        let val = if unit == "count" {
            Value::from(total as i64)
        } else {
            Value::from(total)
        };
        set(out, k, metric(unit, val));
    }
}

/// Adds row `r` to the sums `out` of the rows before it: its numeric metrics (durations,
/// counts, percents) are added, its other columns kept where `out` has none yet.
#[inline(never)]
fn add_row(out: &mut Row, r: &Row) {
    for (k, v) in entries(r) {
        for unit in SUMMED {
            add_metric(out, k, v, unit);
        }
        if !out.contains_key(k) {
            set(out, k, v.clone());
        }
    }
}

/// Pads `s` with spaces to `w` characters, on the right (`left`) or on the left.
fn pad(out: &mut String, s: &str, w: usize, left: bool) {
    let fill = w.saturating_sub(s.chars().count());
    if left {
        push(out, s);
    }
    for _ in 0..fill {
        out.push(' ');
    }
    if !left {
        push(out, s);
    }
}

impl ReportObj {
    fn calls(&self) -> Vec<Row> {
        let mut out = Vec::new();
        for c in self.json["calls"].as_array().map_or(&[][..], |a| &a[..]) {
            if let Some(o) = c.as_object() {
                out.push(o.clone());
            }
        }
        out
    }

    /// The table `Report.table()` prints: calls (aggregated by name and argument shapes,
    /// slowest first), their sums, and the per-device totals.
    pub fn table(&self, sort: bool, aggregate: bool, col_sums: bool) -> String {
        let conf = self.json["configuration"].as_object();
        render(&self.rows(sort, aggregate, col_sums), conf)
    }

    /// The rows of [`ReportObj::table`], in their order.
    #[inline(never)]
    fn rows(&self, sort: bool, aggregate: bool, col_sums: bool) -> Vec<Row> {
        let calls = self.calls();
        let rows: Vec<Row> = if aggregate {
            let mut keys: Vec<String> = Vec::new();
            let mut sums: Vec<Row> = Vec::new();
            for c in &calls {
                let mut key = cell(c, "Name");
                key.push('\u{0}');
                push(&mut key, &cell(c, "Argument Shapes"));
                let g = match keys.iter().position(|k| *k == key) {
                    Some(g) => g,
                    None => {
                        keys.push(key);
                        sums.push(Row::new());
                        sums.len() - 1
                    }
                };
                if let Some(s) = sums.get_mut(g) {
                    add_row(s, c);
                }
            }
            sums
        } else {
            calls
        };
        // Slowest first (when sorting), ties in their order.
        let d: Vec<f64> = rows
            .iter()
            .map(|r| {
                r.get("Duration (us)")
                    .and_then(|v| number(v, "microseconds"))
                    .unwrap_or(0.0)
            })
            .collect();
        let dur = |i: usize| d.get(i).copied().unwrap_or(0.0);
        let order = crate::packed_func::order::stable_order(rows.len(), &|a, b| {
            if sort {
                dur(b).total_cmp(&dur(a))
            } else {
                std::cmp::Ordering::Equal
            }
        });
        let mut out: Vec<Row> = Vec::with_capacity(order.len() + 2);
        let mut total = Row::new();
        for r in order.iter().filter_map(|&i| rows.get(i)) {
            if col_sums {
                add_row(&mut total, r);
            }
            out.push(r.clone());
        }
        if col_sums {
            // The summed columns only (a new row through `set`: no inlined `retain`).
            let mut s = Row::new();
            for (k, v) in entries(&total) {
                if SUMMED.iter().any(|u| number(v, u).is_some()) {
                    set(&mut s, k, v.clone());
                }
            }
            out.push(named(Row::new(), "----------"));
            out.push(named(s, "Sum"));
        }
        if let Some(devs) = self.json["device_metrics"].as_object() {
            for (_, m) in entries(devs) {
                if let Some(m) = m.as_object() {
                    out.push(named(m.clone(), "Total"));
                }
            }
        }
        out
    }

    /// One line per call, comma-separated, with a header.
    pub fn csv(&self) -> String {
        let calls = self.calls();
        let mut headers: Vec<&str> = Vec::new();
        for c in &calls {
            for (k, _) in entries(c) {
                if !headers.contains(&k.as_str()) {
                    headers.push(k);
                }
            }
        }
        // The header line (names as they are), then a line per call (cells with a comma
        // quoted).
        let mut out = String::new();
        for row in std::iter::once(None).chain(calls.iter().map(Some)) {
            for (i, h) in headers.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                match row {
                    None => push(&mut out, h),
                    Some(c) => {
                        let t = cell(c, h);
                        let quote = t.contains(',');
                        if quote {
                            out.push('"');
                        }
                        push(&mut out, &t);
                        if quote {
                            out.push('"');
                        }
                    }
                }
            }
            out.push('\n');
        }
        out
    }
}

/// The table of `rows` (columns: the usual ones, then the others in name order) and the
/// configuration.
#[inline(never)]
fn render(rows: &[Row], conf: Option<&Map>) -> String {
    let mut headers: Vec<&str> = vec![
        "Name",
        "Duration (us)",
        "Percent",
        "Device",
        "Count",
        "Argument Shapes",
    ];
    // The other columns in name order (through the crate's one shared sort).
    let mut keys: Vec<&str> = Vec::new();
    for r in rows {
        keys.extend(entries(r).into_iter().map(|(k, _)| k.as_str()));
    }
    let key = |i: usize| keys.get(i).copied().unwrap_or_default();
    for i in crate::packed_func::order::stable_order(keys.len(), &|a, b| key(a).cmp(key(b))) {
        let k = key(i);
        if !headers.contains(&k) {
            headers.push(k);
        }
    }
    // The header line's cells, then each row's.
    let n = headers.len();
    let mut cells: Vec<String> = Vec::with_capacity((rows.len() + 1) * n);
    for h in &headers {
        cells.push(owned(h));
    }
    for r in rows {
        for h in &headers {
            cells.push(cell(r, h));
        }
    }
    let mut widths = vec![0usize; n];
    for line in cells.chunks(n) {
        for (w, c) in widths.iter_mut().zip(line) {
            *w = (*w).max(c.len());
        }
    }
    let mut out = String::new();
    for line in cells.chunks(n) {
        let start = out.len();
        for (i, (s, &w)) in line.iter().zip(&widths).enumerate() {
            if i > 0 {
                push(&mut out, "  ");
            }
            pad(&mut out, s, w, i == 0);
        }
        let kept = out.get(start..).map_or(0, |l| l.trim_end().len());
        out.truncate(start + kept);
        out.push('\n');
    }
    if let Some(conf) = conf {
        push(&mut out, "\nConfiguration\n-------------\n");
        for (k, v) in entries(conf) {
            push(&mut out, k);
            push(&mut out, ": ");
            push(&mut out, &metric_text(v));
            out.push('\n');
        }
    }
    out
}

fn report_arg<'a>(a: &crate::packed_func::value::Args<'a>) -> Result<&'a ReportObj> {
    a.downcast::<ReportObj>(0)
}

/// Registers `runtime.profiling.{FromJSON,AsJSON,AsTable,AsCSV}`.
pub(crate) fn register(r: &mut Registrar) {
    r.add("runtime.profiling.FromJSON", |a, rv| {
        let json = json::parse(a.str(0)?)
            .map_err(|e| Error::value_fmt(format_args!("runtime.profiling.FromJSON: {e}")))?;
        if !json.is_object() || !json["calls"].is_array() {
            return Err(Error::value(
                "runtime.profiling.FromJSON: a report needs a \"calls\" list",
            ));
        }
        *rv = RetValue::Object(ObjectRef::new(ReportObj { json }));
        Ok(())
    });
    r.add("runtime.profiling.AsJSON", |a, rv| {
        *rv = RetValue::Str(report_arg(&a)?.json.to_string());
        Ok(())
    });
    r.add("runtime.profiling.AsTable", |a, rv| {
        let flag =
            |i: usize| -> Result<bool> { Ok(if i < a.len() { a.i64(i)? != 0 } else { true }) };
        *rv = RetValue::Str(report_arg(&a)?.table(flag(1)?, flag(2)?, flag(3)?));
        Ok(())
    });
    r.add("runtime.profiling.AsCSV", |a, rv| {
        *rv = RetValue::Str(report_arg(&a)?.csv());
        Ok(())
    });
}

#[cfg(test)]
mod tests {
    //! The table and CSV against the implementation they replaced (kept here as the
    //! reference), on ordinary and odd reports: the output must be the same, byte for byte.
    use serde_json::Value;
    use std::collections::BTreeMap;

    /// The printable value of one metric (`{"microseconds": x}`, `{"count": n}`, ...).
    fn metric_text(v: &Value) -> String {
        let Some(o) = v.as_object() else {
            return v.to_string();
        };
        if let Some(x) = o.get("microseconds").and_then(Value::as_f64) {
            return format!("{x:.2}");
        }
        if let Some(x) = o.get("percent").and_then(Value::as_f64) {
            return format!("{x:.2}");
        }
        if let Some(x) = o.get("ratio").and_then(Value::as_f64) {
            return format!("{x:.2}");
        }
        if let Some(x) = o.get("count") {
            return x.to_string();
        }
        if let Some(x) = o.get("string").and_then(Value::as_str) {
            return x.to_string();
        }
        v.to_string()
    }

    fn number(v: &Value, key: &str) -> Option<f64> {
        v.as_object()?.get(key)?.as_f64()
    }

    type Row = BTreeMap<String, Value>;

    /// A row from a JSON object (inserted one by one: `collect` into a B-tree sorts first, and
    /// would bring a stable sort's code for this one use).
    fn row_of(m: &serde_json::Map<String, Value>) -> Row {
        let mut r = Row::new();
        r.extend(m.iter().map(|(k, v)| (k.clone(), v.clone())));
        r
    }

    /// Sums the numeric metrics of `rows` into one row (durations, counts, percents).
    fn sum_rows<'a>(rows: impl Iterator<Item = &'a Row>) -> Row {
        let mut out = Row::new();
        for r in rows {
            for (k, v) in r {
                for unit in ["microseconds", "percent", "count"] {
                    if let Some(x) = number(v, unit) {
                        let prev = out.get(k).and_then(|p| number(p, unit)).unwrap_or(0.0);
                        let total = prev + x;
                        let val = if unit == "count" {
                            serde_json::json!({ unit: total as i64 })
                        } else {
                            serde_json::json!({ unit: total })
                        };
                        out.insert(k.clone(), val);
                    }
                }
                if !out.contains_key(k) {
                    out.insert(k.clone(), v.clone());
                }
            }
        }
        out
    }

    struct Old<'a>(&'a Value);

    impl Old<'_> {
        fn calls(&self) -> Vec<Row> {
            self.0["calls"]
                .as_array()
                .map(|a| a.iter().filter_map(|c| c.as_object()).map(row_of).collect())
                .unwrap_or_default()
        }

        /// The table `Report.table()` prints: calls (aggregated by name and argument shapes,
        /// slowest first), their sums, and the per-device totals.
        fn table(&self, sort: bool, aggregate: bool, col_sums: bool) -> String {
            let calls = self.calls();
            let mut rows: Vec<Row> = if aggregate {
                let mut groups: Vec<(String, Vec<Row>)> = Vec::new();
                for c in calls {
                    let key = format!(
                        "{}\u{0}{}",
                        c.get("Name").map(metric_text).unwrap_or_default(),
                        c.get("Argument Shapes")
                            .map(metric_text)
                            .unwrap_or_default()
                    );
                    match groups.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, g)) => g.push(c),
                        None => groups.push((key, vec![c])),
                    }
                }
                groups
                    .into_iter()
                    .map(|(_, g)| sum_rows(g.iter()))
                    .collect()
            } else {
                calls
            };
            if sort {
                let d = |r: &Row| {
                    r.get("Duration (us)")
                        .and_then(|v| number(v, "microseconds"))
                };
                crate::packed_func::order::sort_stable_by(&mut rows, |a, b| {
                    d(b).unwrap_or(0.0).total_cmp(&d(a).unwrap_or(0.0))
                });
            }
            if col_sums {
                let mut s = sum_rows(rows.iter());
                s.retain(|_, v| {
                    number(v, "microseconds").is_some()
                        || number(v, "percent").is_some()
                        || number(v, "count").is_some()
                });
                s.insert("Name".into(), serde_json::json!({"string": "Sum"}));
                let mut sep = Row::new();
                sep.insert("Name".into(), serde_json::json!({"string": "----------"}));
                rows.push(sep);
                rows.push(s);
            }
            if let Some(devs) = self.0["device_metrics"].as_object() {
                for m in devs.values() {
                    if let Some(m) = m.as_object() {
                        let mut r = row_of(m);
                        r.insert("Name".into(), serde_json::json!({"string": "Total"}));
                        rows.push(r);
                    }
                }
            }
            let mut headers: Vec<String> = [
                "Name",
                "Duration (us)",
                "Percent",
                "Device",
                "Count",
                "Argument Shapes",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            // Inserted one by one: collecting into a B-tree would sort (a stable sort's code).
            let mut extra = std::collections::BTreeSet::new();
            for r in &rows {
                extra.extend(r.keys().cloned());
            }
            for h in extra {
                if !headers.contains(&h) {
                    headers.push(h);
                }
            }
            let cells: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    headers
                        .iter()
                        .map(|h| r.get(h).map(metric_text).unwrap_or_default())
                        .collect()
                })
                .collect();
            let widths: Vec<usize> = (0..headers.len())
                .map(|i| {
                    cells
                        .iter()
                        .map(|c| c[i].len())
                        .chain([headers[i].len()])
                        .max()
                        .unwrap_or(0)
                })
                .collect();
            let line = |c: &[String]| -> String {
                let parts: Vec<String> = c
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        if i == 0 {
                            format!("{s:<w$}", w = widths[i])
                        } else {
                            format!("{s:>w$}", w = widths[i])
                        }
                    })
                    .collect();
                parts.join("  ").trim_end().to_string()
            };
            let mut out = line(&headers) + "\n";
            for c in &cells {
                out += &line(c);
                out += "\n";
            }
            if let Some(conf) = self.0["configuration"].as_object() {
                out += "\nConfiguration\n-------------\n";
                for (k, v) in conf {
                    out += &format!("{k}: {}\n", metric_text(v));
                }
            }
            out
        }

        /// One line per call, comma-separated, with a header.
        fn csv(&self) -> String {
            let calls = self.calls();
            let headers: Vec<String> = {
                let mut h: Vec<String> = Vec::new();
                for c in &calls {
                    for k in c.keys() {
                        if !h.contains(k) {
                            h.push(k.clone());
                        }
                    }
                }
                h
            };
            let mut out = headers.join(",") + "\n";
            for c in &calls {
                let row: Vec<String> = headers
                    .iter()
                    .map(|h| {
                        let t = c.get(h).map(metric_text).unwrap_or_default();
                        if t.contains(',') {
                            format!("\"{t}\"")
                        } else {
                            t
                        }
                    })
                    .collect();
                out += &row.join(",");
                out += "\n";
            }
            out
        }
    }

    fn reports() -> Vec<Value> {
        let call = |name: &str, us: f64, shapes: &str, pct: f64| {
            serde_json::json!({
                "Duration (us)": {"microseconds": us},
                "Count": {"count": 1},
                "Name": {"string": name},
                "Device": {"string": "cpu0"},
                "Argument Shapes": {"string": shapes},
                "Percent": {"percent": pct},
            })
        };
        let ordinary = serde_json::json!({
            "calls": [
                call("fused_add", 12.5, "float32[2, 3]", 10.0),
                call("matmul", 100.25, "float32[2, 3], float32[3, 4]", 80.0),
                call("fused_add", 7.125, "float32[2, 3]", 5.0),
                call("fused_add", 7.125, "float32[4]", 5.0),
                call("relu", 0.0, "", 0.0),
            ],
            "device_metrics": {
                "cpu0": {
                    "Duration (us)": {"microseconds": 127.0},
                    "Count": {"count": 1},
                    "Name": {"string": "Total"},
                    "Device": {"string": "cpu0"},
                },
            },
            "configuration": {
                "Number of threads": {"count": 4},
                "Executor": {"string": "VM"},
            },
        });
        let odd = serde_json::json!({
            "calls": [
                {"Name": {"string": "ünïcødé ✓"}, "Duration (us)": {"microseconds": 1e308},
                 "Extra": 5, "Zeta": [1, 2], "Alpha": {"ratio": 0.333}},
                {"Name": {"string": "a,b "}, "Duration (us)": {"microseconds": 1e308},
                 "Count": {"count": 2.5}, "Both": {"microseconds": 1.0, "count": 3}},
                {"Name": {"string": "ünïcødé ✓"}, "Duration (us)": {"microseconds": -3.5},
                 "Count": {"count": "x"}, "Percent": {"percent": 1e-9}},
                {"Name": "plain", "Argument Shapes": {"other": true}, "Both": {"count": 4}},
                {"Name": {"string": "a\u{0}b"}, "Argument Shapes": {"string": "c"}},
                {"Name": {"string": "a"}, "Argument Shapes": {"string": "b\u{0}c"}},
                {"Duration (us)": {"microseconds": 2}, "Device": null, "Empty": {}},
                "not an object",
                {"Name": {"string": "tab\t "}, "Percent": {"percent": 50}},
            ],
            "device_metrics": {"b": {"Count": {"count": 7}}, "a": 3, "c": {}},
            "configuration": {"z": [1], "a": {"microseconds": 2.555}},
        });
        vec![
            ordinary,
            odd,
            serde_json::json!({"calls": []}),
            serde_json::json!({"calls": [{}], "device_metrics": [], "configuration": 1}),
        ]
    }

    #[test]
    fn the_table_and_csv_are_those_of_the_reference_implementation() {
        for json in reports() {
            let old = Old(&json);
            let new = super::ReportObj {
                json: crate::packed_func::json::parse(&json.to_string()).unwrap(),
            };
            for flags in 0..8 {
                let (sort, aggregate, col_sums) = (flags & 1 != 0, flags & 2 != 0, flags & 4 != 0);
                assert_eq!(
                    new.table(sort, aggregate, col_sums),
                    old.table(sort, aggregate, col_sums),
                    "{json} {flags}"
                );
            }
            assert_eq!(new.csv(), old.csv(), "{json}");
        }
    }
}
