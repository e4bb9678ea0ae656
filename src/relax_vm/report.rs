//! `runtime.profiling.Report` as far as TVM's Python reads one: a report built from the JSON a
//! profiler returns (`FromJSON`), printed back as JSON, as a table and as CSV. The Relax VM's
//! `profile` (and the graph debug executor's `profile_rpc`) hand their reports to Python this
//! way.

use crate::object::ObjectRef;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::json::{self, Map, Value};
use crate::packed_func::registry::Registrar;
use crate::packed_func::value::RetValue;
use std::collections::BTreeMap;

/// A profiling report, kept as its JSON.
pub struct ReportObj {
    json: Value,
}

// SAFETY: `ReportObj` is the payload stored under this key only (a type of its own).
unsafe impl crate::object::ObjectType for ReportObj {
    crate::object_type!("runtime.profiling.Report", parent 0);
}

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
fn row_of(m: &Map) -> Row {
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
                        json::object(vec![(unit, Value::from(total as i64))])
                    } else {
                        json::object(vec![(unit, Value::from(total))])
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

impl ReportObj {
    fn calls(&self) -> Vec<Row> {
        self.json["calls"]
            .as_array()
            .map(|a| a.iter().filter_map(|c| c.as_object()).map(row_of).collect())
            .unwrap_or_default()
    }

    /// The table `Report.table()` prints: calls (aggregated by name and argument shapes,
    /// slowest first), their sums, and the per-device totals.
    pub fn table(&self, sort: bool, aggregate: bool, col_sums: bool) -> String {
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
            s.insert("Name".into(), json::object(vec![("string", "Sum".into())]));
            let mut sep = Row::new();
            sep.insert(
                "Name".into(),
                json::object(vec![("string", "----------".into())]),
            );
            rows.push(sep);
            rows.push(s);
        }
        if let Some(devs) = self.json["device_metrics"].as_object() {
            for m in devs.values() {
                if let Some(m) = m.as_object() {
                    let mut r = row_of(m);
                    r.insert(
                        "Name".into(),
                        json::object(vec![("string", "Total".into())]),
                    );
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
        if let Some(conf) = self.json["configuration"].as_object() {
            out += "\nConfiguration\n-------------\n";
            for (k, v) in conf {
                out += &format!("{k}: {}\n", metric_text(v));
            }
        }
        out
    }

    /// One line per call, comma-separated, with a header.
    pub fn csv(&self) -> String {
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
