//! The debug executor's reports: per-node and per-op timings, printable as a table (for the
//! CLI and the `profile` function) and as the reference's profiling report JSON (for
//! `profile_rpc`, which Python turns back into a `Report`).

use crate::packed_func::json::{put, put_str, write_string};
use crate::packed_func::types::{device_string, DLDevice};
use std::fmt::Write;

/// Timing of one node (one call of its op per run).
#[derive(Clone, Debug)]
pub struct NodeProfile {
    /// The node's index in the graph.
    pub node_index: usize,
    /// The node's name.
    pub node: String,
    /// The function it calls (`__nop`, `__copy` or a library function).
    pub op: String,
    /// Where it runs.
    pub device: DLDevice,
    /// Mean time per run, in microseconds.
    pub time_us: f64,
    /// Data type names and shapes of its arguments (inputs, then outputs).
    pub arg_shapes: Vec<(String, Vec<i64>)>,
    /// The node's other attributes (`hash`, layouts, ...), by name in byte order.
    pub attrs: Vec<(String, String)>,
}

impl NodeProfile {
    /// Argument shapes as the reference prints them: `float32[1, 4], float32[4]`.
    pub fn shape_string(&self) -> String {
        let mut out = String::new();
        for (k, (t, s)) in self.arg_shapes.iter().enumerate() {
            if k > 0 {
                put_str(&mut out, ", ");
            }
            put_str(&mut out, t);
            put(&mut out, b'[');
            for (j, d) in s.iter().enumerate() {
                let _ = write!(out, "{}{d}", if j > 0 { ", " } else { "" });
            }
            put(&mut out, b']');
        }
        out
    }
}

/// Timing of one op (function), summed over the nodes calling it.
#[derive(Clone, Debug, PartialEq)]
pub struct OpProfile {
    /// The function.
    pub name: String,
    /// Mean time per run over all its calls, in microseconds.
    pub time_us: f64,
    /// Share of the total run time, in percent.
    pub percent: f64,
    /// Calls per run (nodes calling it).
    pub calls: usize,
}

/// A profile of a graph: per node, per op, and the whole run.
#[derive(Clone, Debug)]
pub struct ProfileReport {
    /// Per node, in graph order.
    pub nodes: Vec<NodeProfile>,
    /// Per op, slowest first.
    pub ops: Vec<OpProfile>,
    /// Mean time of a whole run, in microseconds (timing overhead included).
    pub total_us: f64,
    /// Runs measured.
    pub runs: usize,
    /// The executor's devices.
    pub devices: Vec<DLDevice>,
}

impl ProfileReport {
    /// Builds a report, aggregating nodes by op.
    pub fn new(
        nodes: Vec<NodeProfile>,
        total_us: f64,
        runs: usize,
        devices: Vec<DLDevice>,
    ) -> Self {
        let mut by_op: Vec<OpProfile> = Vec::new();
        for n in &nodes {
            match by_op.iter_mut().find(|o| o.name == n.op) {
                Some(o) => {
                    o.time_us += n.time_us;
                    o.calls += 1;
                }
                None => {
                    by_op.push(OpProfile {
                        name: n.op.clone(),
                        time_us: n.time_us,
                        percent: 0.0,
                        calls: 1,
                    });
                }
            }
        }
        for o in &mut by_op {
            o.percent = if total_us > 0.0 {
                o.time_us / total_us * 100.0
            } else {
                0.0
            };
        }
        let time = |i: usize| by_op.get(i).map_or(0.0, |o| o.time_us);
        let order = crate::packed_func::order::stable_order(by_op.len(), &|a, b| {
            time(b).total_cmp(&time(a))
        });
        let mut ops = Vec::with_capacity(by_op.len());
        for i in order {
            let Some(o) = by_op.get_mut(i) else {
                continue;
            };
            ops.push(OpProfile {
                name: std::mem::take(&mut o.name),
                ..*o
            });
        }
        ProfileReport {
            nodes,
            ops,
            total_us,
            runs,
            devices,
        }
    }

    /// Share of the total for one node, in percent.
    pub fn node_percent(&self, n: &NodeProfile) -> f64 {
        if self.total_us > 0.0 {
            n.time_us / self.total_us * 100.0
        } else {
            0.0
        }
    }

    /// The per-op table: name, time, share, calls; then the total.
    pub fn op_table(&self) -> String {
        let w = self
            .ops
            .iter()
            .map(|o| o.name.len())
            .max()
            .unwrap_or(0)
            .max(2);
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<w$}  {:>12}  {:>8}  {:>5}",
            "Op", "Time (us)", "Percent", "Calls"
        );
        for o in &self.ops {
            op_row(&mut s, w, &o.name, o.time_us, o.percent, o.calls);
        }
        op_row(&mut s, w, "Total", self.total_us, 100.0, self.nodes.len());
        s
    }

    /// The per-node table, in graph order.
    pub fn node_table(&self) -> String {
        let wn = self
            .nodes
            .iter()
            .map(|n| n.node.len())
            .max()
            .unwrap_or(0)
            .max(4);
        let wo = self
            .nodes
            .iter()
            .map(|n| n.op.len())
            .max()
            .unwrap_or(0)
            .max(2);
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<wn$}  {:<wo$}  {:>12}  {:>8}  {:<6}  Argument Shapes",
            "Node", "Op", "Time (us)", "Percent", "Device"
        );
        for n in &self.nodes {
            let _ = writeln!(
                s,
                "{:<wn$}  {:<wo$}  {:>12.3}  {:>7.2}%  {:<6}  {}",
                n.node,
                n.op,
                n.time_us,
                self.node_percent(n),
                device_string(n.device),
                n.shape_string()
            );
        }
        s
    }

    /// Both tables, as the debug executor's `profile` returns them.
    pub fn table(&self) -> String {
        format!(
            "{}\n{}\nMean over {} run(s); total includes timing overhead.\n",
            self.node_table(),
            self.op_table(),
            self.runs
        )
    }

    /// The reference's report JSON (`Report::AsJSON`): one call per node with its duration,
    /// count, name, device, argument shapes, percentage, hash and layouts; the total per
    /// device; the configuration.
    pub fn to_json(&self) -> String {
        let mut s = String::from("{\"calls\":[");
        for (k, n) in self.nodes.iter().enumerate() {
            if k > 0 {
                put(&mut s, b',');
            }
            put_str(&mut s, "{\"Duration (us)\":");
            push_dur(&mut s, n.time_us);
            put_str(&mut s, ",\"Count\":{\"count\":1},\"Name\":");
            push_string(&mut s, &n.op);
            put_str(&mut s, ",\"Device\":");
            push_string(&mut s, &device_string(n.device));
            put_str(&mut s, ",\"Argument Shapes\":");
            push_string(&mut s, &n.shape_string());
            let _ = write!(
                s,
                ",\"Percent\":{{\"percent\":{:.17}}}",
                self.node_percent(n)
            );
            for (k, v) in &n.attrs {
                if k == "hash" {
                    put_str(&mut s, ",\"Hash\":");
                } else if crate::packed_func::text::find(k, "layout").is_some() {
                    put(&mut s, b',');
                    write_string(k, &mut s);
                    put(&mut s, b':');
                } else {
                    continue;
                }
                push_string(&mut s, v);
            }
            put(&mut s, b'}');
        }
        put_str(&mut s, "],\"device_metrics\":{");
        for (k, d) in self.devices.iter().enumerate() {
            if k > 0 {
                put(&mut s, b',');
            }
            let name = device_string(*d);
            write_string(&name, &mut s);
            put_str(&mut s, ":{\"Duration (us)\":");
            push_dur(&mut s, self.total_us);
            put_str(
                &mut s,
                ",\"Count\":{\"count\":1},\"Name\":{\"string\":\"Total\"},\"Device\":",
            );
            push_string(&mut s, &name);
            put(&mut s, b'}');
        }
        let _ = write!(
            s,
            "}},\"configuration\":{{\"Number of threads\":{{\"count\":{}}},\"Executor\":\
             {{\"string\":\"Graph\"}}}}}}",
            crate::threading::num_threads()
        );
        s
    }
}

/// One row of the per-op table (the ops' rows and the total share it).
#[inline(never)]
fn op_row(s: &mut String, w: usize, name: &str, time_us: f64, percent: f64, calls: usize) {
    let _ = writeln!(
        s,
        "{name:<w$}  {time_us:>12.3}  {percent:>7.2}%  {calls:>5}"
    );
}

/// Appends `{"microseconds":<us>}`.
fn push_dur(s: &mut String, us: f64) {
    let _ = write!(s, "{{\"microseconds\":{us:.17}}}");
}

/// Appends `{"string":<v as a JSON string>}`.
fn push_string(s: &mut String, v: &str) {
    put_str(s, "{\"string\":");
    write_string(v, s);
    put(s, b'}');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(i: usize, op: &str, us: f64) -> NodeProfile {
        NodeProfile {
            node_index: i,
            node: format!("n{i}"),
            op: op.into(),
            device: DLDevice::CPU,
            time_us: us,
            arg_shapes: vec![("float32".into(), vec![1, 4])],
            attrs: [("hash".to_string(), "h".to_string())].into(),
        }
    }

    #[test]
    fn aggregates_and_prints() {
        let r = ProfileReport::new(
            vec![
                node(1, "add", 1.0),
                node(2, "relu", 3.0),
                node(3, "add", 2.0),
            ],
            10.0,
            5,
            vec![DLDevice::CPU],
        );
        assert_eq!(r.ops[0].name, "add");
        assert_eq!(r.ops[0].calls, 2);
        assert!((r.ops[0].time_us - 3.0).abs() < 1e-9);
        assert!((r.ops[0].percent - 30.0).abs() < 1e-9);
        let t = r.table();
        assert!(t.contains("relu") && t.contains("float32[1, 4]"), "{t}");
        let j: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(j["calls"].as_array().unwrap().len(), 3);
        assert_eq!(j["calls"][0]["Name"]["string"], "add");
        assert_eq!(j["calls"][0]["Hash"]["string"], "h");
        assert_eq!(j["device_metrics"]["cpu0"]["Name"]["string"], "Total");
    }

    /// The report's texts byte for byte as the first implementation wrote them (JSON with
    /// escapes, layouts and the hash; both tables; the packed timings).
    #[test]
    fn texts_are_unchanged() {
        let a = NodeProfile {
            node_index: 1,
            node: "n\"1".into(),
            op: "fused_add".into(),
            device: DLDevice::CPU,
            time_us: 1.25,
            arg_shapes: vec![("float32".into(), vec![1, 4]), ("int8".into(), vec![])],
            attrs: [
                ("data_layout".to_string(), "NC\"HW".to_string()),
                ("hash".to_string(), "abc".to_string()),
                ("other".to_string(), "x".to_string()),
            ]
            .into(),
        };
        let b = NodeProfile {
            node_index: 2,
            node: "m".into(),
            op: "relu".into(),
            time_us: 3.0,
            attrs: Vec::new(),
            arg_shapes: vec![],
            ..a.clone()
        };
        let r = ProfileReport::new(
            vec![a, b],
            10.0,
            5,
            vec![DLDevice::CPU, DLDevice::new(2, 1)],
        );
        let json = concat!(
            r#"{"calls":[{"Duration (us)":{"microseconds":1.25000000000000000},"Count":{"count":1},"#,
            r#""Name":{"string":"fused_add"},"Device":{"string":"cpu0"},"Argument Shapes":"#,
            r#"{"string":"float32[1, 4], int8[]"},"Percent":{"percent":12.50000000000000000},"#,
            r#""data_layout":{"string":"NC\"HW"},"Hash":{"string":"abc"}},{"Duration (us)":"#,
            r#"{"microseconds":3.00000000000000000},"Count":{"count":1},"Name":{"string":"relu"},"#,
            r#""Device":{"string":"cpu0"},"Argument Shapes":{"string":""},"Percent":"#,
            r#"{"percent":30.00000000000000000}}],"device_metrics":{"cpu0":{"Duration (us)":"#,
            r#"{"microseconds":10.00000000000000000},"Count":{"count":1},"Name":{"string":"Total"},"#,
            r#""Device":{"string":"cpu0"}},"cuda1":{"Duration (us)":{"microseconds":10.00000000000000000},"#,
            r#""Count":{"count":1},"Name":{"string":"Total"},"Device":{"string":"cuda1"}}},"#,
            r#""configuration":{"Number of threads":{"count":NT},"Executor":{"string":"Graph"}}}"#
        )
        .replace("NT", &crate::threading::num_threads().to_string());
        assert_eq!(r.to_json(), json);
        let table = "Node  Op            Time (us)   Percent  Device  Argument Shapes\n\
                     n\"1   fused_add         1.250    12.50%  cpu0    float32[1, 4], int8[]\n\
                     m     relu              3.000    30.00%  cpu0    \n\
                     \n\
                     Op            Time (us)   Percent  Calls\n\
                     relu              3.000    30.00%      1\n\
                     fused_add         1.250    12.50%      1\n\
                     Total            10.000   100.00%      2\n\
                     \n\
                     Mean over 5 run(s); total includes timing overhead.\n";
        assert_eq!(r.table(), table);
    }
}
