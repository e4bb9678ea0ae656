//! Profiling: per-node timing (`run_individual`, `run_individual_node`) and the profile
//! report of the debug executor.

#[cfg(feature = "profiling")]
use super::super::debug::{NodeProfile, ProfileReport};
#[cfg(feature = "profiling")]
use super::super::time_eval::sync_device;
use super::super::time_eval::{time_evaluate, TimeEvalConfig};
use super::ops::OpKind;
use super::{Executor, State};
use crate::packed_func::error::Result;
use crate::packed_func::types::DLDevice;
#[cfg(feature = "profiling")]
use crate::sync::Instant;

impl Executor {
    /// Device of node `nid`'s first output (where its op runs).
    #[cfg(feature = "profiling")]
    fn node_device(&self, st: &State, nid: usize) -> DLDevice {
        let eid = self.graph.entry_id(nid as u32, 0);
        st.data_entry.get(eid).map_or(DLDevice::CPU, |a| a.device())
    }

    /// Data type name and shape of entry `eid`.
    #[cfg(feature = "profiling")]
    #[inline(never)]
    fn entry_desc(&self, eid: usize) -> (String, Vec<i64>) {
        let g = &self.graph;
        match (g.dltype_names.get(eid), g.shape.get(eid)) {
            (Some(t), Some(s)) => (t.clone(), s.clone()),
            _ => Default::default(),
        }
    }

    /// Times node `nid`'s op alone; zeros for input nodes.
    pub(crate) fn run_individual_node(&self, nid: i64, cfg: &TimeEvalConfig) -> Result<Vec<f64>> {
        let nid = self.check_node(nid)?;
        cfg.validate()?;
        let mut st = self.state.lock_cold()?;
        self.time_node(&mut st, nid, cfg)
    }

    fn time_node(&self, st: &mut State, nid: usize, cfg: &TimeEvalConfig) -> Result<Vec<f64>> {
        if st
            .ops
            .get(nid)
            .is_none_or(|o| matches!(o.kind, OpKind::None))
        {
            return Ok(vec![0.0; cfg.repeat.max(0) as usize]);
        }
        let dev = self.devices.first().copied().unwrap_or(DLDevice::CPU);
        time_evaluate(&mut || self.run_ops(st, nid, nid + 1), None, dev, cfg)
    }

    /// Times each node's op: one full run first, then per node `repeat` measurements.
    pub(crate) fn run_individual(&self, cfg: &TimeEvalConfig) -> Result<Vec<Vec<f64>>> {
        cfg.validate()?;
        let mut st = self.state.lock_cold()?;
        let st = &mut *st;
        let n = st.ops.len();
        self.run_ops(st, 0, n)?;
        let mut out = Vec::with_capacity(st.ops.len());
        for nid in 0..st.ops.len() {
            let mut t = self.time_node(st, nid, cfg)?;
            for x in &mut t {
                if x.is_nan() {
                    *x = 0.0;
                }
            }
            out.push(t);
        }
        Ok(out)
    }

    /// Times every op over `runs` full runs (after three warm-up runs); `runs == 0` picks
    /// between 1 and 100 runs to fill about 100 ms.
    #[cfg(feature = "profiling")]
    pub(crate) fn profile(&self, runs: usize) -> Result<ProfileReport> {
        let mut st = self.state.lock_cold()?;
        let st = &mut *st;
        let warm = Instant::now();
        let n = st.ops.len();
        for _ in 0..3 {
            self.run_ops(st, 0, n)?;
        }
        let runs = if runs == 0 {
            let per_run = warm.elapsed().as_secs_f64() / 3.0;
            (0.1 / per_run.max(1e-9)).clamp(1.0, 100.0) as usize
        } else {
            runs
        };
        let mut node_ns = vec![0u128; n];
        let mut total_ns = 0u128;
        for _ in 0..runs {
            for d in &self.devices {
                sync_device(*d)?;
            }
            let total = Instant::now();
            for (nid, ns) in node_ns.iter_mut().enumerate() {
                if st
                    .ops
                    .get(nid)
                    .is_none_or(|o| matches!(o.kind, OpKind::None))
                {
                    continue;
                }
                let dev = self.node_device(st, nid);
                let t = Instant::now();
                self.run_ops(st, nid, nid + 1)?;
                sync_device(dev)?;
                *ns += t.elapsed().as_nanos();
            }
            total_ns += total.elapsed().as_nanos();
        }
        let mut nodes = Vec::new();
        for (nid, ns) in node_ns.iter().enumerate() {
            if matches!(st.ops[nid].kind, OpKind::None) {
                continue;
            }
            let node = &self.graph.nodes[nid];
            let mut shapes = Vec::new();
            for e in &node.inputs {
                shapes.push(self.entry_desc(self.graph.eid(*e)));
            }
            for j in 0..node.param.num_outputs {
                shapes.push(self.entry_desc(self.graph.entry_id(nid as u32, j)));
            }
            nodes.push(NodeProfile {
                node_index: nid,
                node: node.name.clone(),
                op: node.param.func_name.clone(),
                device: self.node_device(st, nid),
                time_us: *ns as f64 / 1e3 / runs as f64,
                arg_shapes: shapes,
                attrs: node.param.attrs.clone(),
            });
        }
        Ok(ProfileReport::new(
            nodes,
            total_ns as f64 / 1e3 / runs as f64,
            runs,
            self.devices.clone(),
        ))
    }
}
