//! The graph JSON TVM's graph executor codegen emits, parsed and validated.
//!
//! A graph lists nodes (`"null"` nodes are inputs and parameters, `"tvm_op"` nodes call a
//! function of the library), the argument nodes, the output entries (`heads`), the row
//! pointers that number every node output ("entries"), and per-entry attributes: data type,
//! shape, storage id and, optionally, device type and storage scope.
//!
//! Everything is checked while parsing, so that the executor can index freely afterwards: a
//! malformed graph is an error naming what is wrong, never a panic.

use crate::packed_func::dtype::dtype_from_string;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::json::{Map, Value};
use crate::packed_func::types::DLDataType;
use std::collections::BTreeMap;

/// A reference to one output of a node.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct NodeEntry {
    /// The node.
    pub node_id: u32,
    /// Which of its outputs.
    pub index: u32,
}

/// The kind of a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpType {
    /// An input or parameter (`"null"`).
    Null,
    /// A call of a library function (`"tvm_op"`).
    TvmOp,
}

/// The parameters of a `tvm_op` node.
#[derive(Clone, Debug, Default)]
pub struct OpParam {
    /// The function to call (`__nop` and `__copy` are handled by the executor).
    pub func_name: String,
    /// Number of inputs.
    pub num_inputs: u32,
    /// Number of outputs.
    pub num_outputs: u32,
    /// Whether arguments are passed flattened to one dimension.
    pub flatten_data: bool,
    /// The other attributes (`hash`, layouts, ...), as strings.
    pub attrs: BTreeMap<String, String>,
}

/// One node of the graph.
#[derive(Clone, Debug)]
pub struct Node {
    /// Its kind.
    pub op_type: OpType,
    /// Its name (input names for `null` nodes).
    pub name: String,
    /// Its inputs.
    pub inputs: Vec<NodeEntry>,
    /// Its parameters (`tvm_op` nodes).
    pub param: OpParam,
}

/// A validated graph.
#[derive(Clone, Debug)]
pub struct Graph {
    /// The nodes, in execution order.
    pub nodes: Vec<Node>,
    /// The node ids of the inputs (including parameters), in input-index order.
    pub input_nodes: Vec<u32>,
    /// The outputs, in output-index order.
    pub outputs: Vec<NodeEntry>,
    /// `node_row_ptr[n]` is the entry id of node `n`'s first output.
    pub node_row_ptr: Vec<u32>,
    /// Data type of each entry.
    pub dltype: Vec<DLDataType>,
    /// Data type names of each entry, as written in the graph.
    pub dltype_names: Vec<String>,
    /// Storage id of each entry.
    pub storage_id: Vec<u32>,
    /// Device type of each entry, when the graph says (heterogeneous graphs).
    pub device_index: Option<Vec<i32>>,
    /// Storage scope of each entry, when the graph says.
    pub storage_scope: Option<Vec<String>>,
    /// Shape of each entry.
    pub shape: Vec<Vec<i64>>,
}

fn bad(msg: impl std::fmt::Display) -> Error {
    Error::value_fmt(format_args!("invalid graph JSON: {msg}"))
}

fn as_u32(v: &Value, what: &dyn Fn() -> String) -> Result<u32> {
    v.as_u64()
        .filter(|&x| x <= u32::MAX as u64)
        .map(|x| x as u32)
        .ok_or_else(|| {
            bad(format!(
                "{} must be a non-negative integer, got {v}",
                what()
            ))
        })
}

fn as_array<'a>(v: &'a Value, what: &dyn Fn() -> String) -> Result<&'a Vec<Value>> {
    v.as_array()
        .ok_or_else(|| bad(format!("{} must be a list", what())))
}

/// An attribute value of a node: TVM writes them as strings; numbers are accepted too.
fn attr_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn attr_uint(v: &Value, key: &str, node: &str) -> Result<u32> {
    let s = attr_string(v);
    s.trim().parse::<u32>().map_err(|_| {
        bad(format!(
            "node '{node}': attribute {key} must be a non-negative integer, got {v}"
        ))
    })
}

fn parse_entry(v: &Value, what: &dyn Fn() -> String) -> Result<NodeEntry> {
    let a = as_array(v, what)?;
    if a.len() < 2 || a.len() > 3 {
        return Err(bad(format!(
            "{} must be [node_id, index] or [node_id, index, version], got {v}",
            what()
        )));
    }
    Ok(NodeEntry {
        node_id: as_u32(&a[0], &|| format!("{}: node id", what()))?,
        index: as_u32(&a[1], &|| format!("{}: output index", what()))?,
    })
}

fn parse_node(nid: usize, v: &Value) -> Result<Node> {
    let obj = v
        .as_object()
        .ok_or_else(|| bad(format!("node {nid} must be an object")))?;
    let op = obj
        .get("op")
        .and_then(Value::as_str)
        .ok_or_else(|| bad(format!("node {nid} has no \"op\" string")))?;
    let name = obj
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| bad(format!("node {nid} has no \"name\" string")))?
        .to_string();
    let op_type = match op {
        "null" => OpType::Null,
        "tvm_op" => OpType::TvmOp,
        other => {
            return Err(bad(format!(
                "node {nid} ('{name}') has op type '{other}': only \"null\" and \"tvm_op\" \
                 nodes can be executed"
            )))
        }
    };
    let mut inputs = Vec::new();
    if let Some(ins) = obj.get("inputs") {
        for (i, e) in as_array(ins, &|| format!("node '{name}': inputs"))?
            .iter()
            .enumerate()
        {
            inputs.push(parse_entry(e, &|| format!("node '{name}': input {i}"))?);
        }
    } else if op_type == OpType::TvmOp {
        return Err(bad(format!("node {nid} ('{name}') has no \"inputs\"")));
    }
    let mut param = OpParam {
        num_inputs: inputs.len() as u32,
        num_outputs: 1,
        ..OpParam::default()
    };
    let attrs = obj.get("attrs").or_else(|| obj.get("attr"));
    let mut has_func = false;
    if let Some(attrs) = attrs {
        let attrs = attrs
            .as_object()
            .ok_or_else(|| bad(format!("node '{name}': attrs must be an object")))?;
        for (k, v) in attrs {
            match k.as_str() {
                "func_name" => {
                    param.func_name = attr_string(v);
                    has_func = true;
                }
                "num_inputs" => param.num_inputs = attr_uint(v, k, &name)?,
                "num_outputs" => param.num_outputs = attr_uint(v, k, &name)?,
                "flatten_data" => param.flatten_data = attr_uint(v, k, &name)? != 0,
                _ => {
                    param.attrs.insert(k.clone(), attr_string(v));
                }
            }
        }
    }
    if op_type == OpType::TvmOp && !has_func {
        return Err(bad(format!(
            "node {nid} ('{name}') is a tvm_op without a func_name attribute"
        )));
    }
    Ok(Node {
        op_type,
        name,
        inputs,
        param,
    })
}

/// Reads one graph attribute `["<type>", <list>]`, checking the type tag.
fn typed_list<'a>(attrs: &'a Map, key: &str, tag: &str) -> Result<Option<&'a Vec<Value>>> {
    let Some(v) = attrs.get(key) else {
        return Ok(None);
    };
    let pair = v
        .as_array()
        .filter(|a| a.len() == 2)
        .ok_or_else(|| bad(format!("attrs.{key} must be [\"{tag}\", [...]]")))?;
    if pair[0].as_str() != Some(tag) {
        return Err(bad(format!(
            "attrs.{key} must be tagged \"{tag}\", got {}",
            pair[0]
        )));
    }
    Ok(Some(as_array(&pair[1], &|| format!("attrs.{key}"))?))
}

impl Graph {
    /// Parses and validates a graph.
    pub fn parse(json: &str) -> Result<Graph> {
        let root = crate::packed_func::json::parse(json)
            .map_err(|e| Error::tvm_fmt(format_args!("cannot parse graph JSON: {e}")))?;
        let obj = root
            .as_object()
            .ok_or_else(|| bad("the top level must be an object"))?;
        let get = |k: &str| obj.get(k).ok_or_else(|| bad(format!("missing \"{k}\"")));

        let nodes = as_array(get("nodes")?, &|| "nodes".into())?
            .iter()
            .enumerate()
            .map(|(i, n)| parse_node(i, n))
            .collect::<Result<Vec<_>>>()?;
        if nodes.len() >= u32::MAX as usize {
            return Err(bad("too many nodes"));
        }
        let input_nodes = as_array(get("arg_nodes")?, &|| "arg_nodes".into())?
            .iter()
            .map(|v| as_u32(v, &|| "arg_nodes entry".into()))
            .collect::<Result<Vec<_>>>()?;
        let node_row_ptr = as_array(get("node_row_ptr")?, &|| "node_row_ptr".into())?
            .iter()
            .map(|v| as_u32(v, &|| "node_row_ptr entry".into()))
            .collect::<Result<Vec<_>>>()?;
        let outputs = as_array(get("heads")?, &|| "heads".into())?
            .iter()
            .enumerate()
            .map(|(i, v)| parse_entry(v, &|| format!("heads[{i}]")))
            .collect::<Result<Vec<_>>>()?;

        let attrs = get("attrs")?
            .as_object()
            .ok_or_else(|| bad("attrs must be an object"))?;
        let need = |k: &str, tag: &str| {
            typed_list(attrs, k, tag)?.ok_or_else(|| bad(format!("attrs has no \"{k}\"")))
        };
        let dltype_names = need("dltype", "list_str")?
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| bad("attrs.dltype entries must be strings"))
            })
            .collect::<Result<Vec<_>>>()?;
        let storage_id = need("storage_id", "list_int")?
            .iter()
            .map(|v| as_u32(v, &|| "attrs.storage_id entry".into()))
            .collect::<Result<Vec<_>>>()?;
        let shape = need("shape", "list_shape")?
            .iter()
            .enumerate()
            .map(|(i, s)| {
                as_array(s, &|| format!("attrs.shape[{i}]"))?
                    .iter()
                    .map(|d| {
                        d.as_i64().filter(|&x| x >= 0).ok_or_else(|| {
                            bad(format!(
                                "attrs.shape[{i}] must hold non-negative integers, got {d}"
                            ))
                        })
                    })
                    .collect::<Result<Vec<_>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        let device_index = typed_list(attrs, "device_index", "list_int")?
            .map(|l| {
                l.iter()
                    .map(|v| {
                        v.as_i64()
                            .filter(|&x| x >= 0 && x <= i32::MAX as i64)
                            .map(|x| x as i32)
                            .ok_or_else(|| bad(format!("attrs.device_index entry {v} is invalid")))
                    })
                    .collect::<Result<Vec<_>>>()
            })
            .transpose()?;
        let storage_scope = typed_list(attrs, "storage_scope", "list_str")?
            .map(|l| {
                l.iter()
                    .map(|v| {
                        v.as_str()
                            .map(str::to_string)
                            .ok_or_else(|| bad("attrs.storage_scope entries must be strings"))
                    })
                    .collect::<Result<Vec<_>>>()
            })
            .transpose()?;

        let dltype = dltype_names
            .iter()
            .map(|s| dtype_from_string(s).map_err(|e| bad(e.into_message())))
            .collect::<Result<Vec<_>>>()?;

        let g = Graph {
            nodes,
            input_nodes,
            outputs,
            node_row_ptr,
            dltype,
            dltype_names,
            storage_id,
            device_index,
            storage_scope,
            shape,
        };
        g.validate()?;
        Ok(g)
    }

    fn validate(&self) -> Result<()> {
        let n = self.nodes.len();
        if self.node_row_ptr.len() != n + 1 {
            return Err(bad(format!(
                "node_row_ptr has {} entries but the graph has {n} nodes (expected {})",
                self.node_row_ptr.len(),
                n + 1
            )));
        }
        if self.node_row_ptr[0] != 0 {
            return Err(bad("node_row_ptr must start at 0"));
        }
        for w in self.node_row_ptr.windows(2) {
            if w[1] < w[0] {
                return Err(bad("node_row_ptr must be non-decreasing"));
            }
        }
        let entries = self.num_entries();
        for (k, len) in [
            ("dltype", self.dltype.len()),
            ("storage_id", self.storage_id.len()),
            ("shape", self.shape.len()),
            (
                "device_index",
                self.device_index.as_ref().map_or(entries, Vec::len),
            ),
            (
                "storage_scope",
                self.storage_scope.as_ref().map_or(entries, Vec::len),
            ),
        ] {
            if len != entries {
                return Err(bad(format!(
                    "attrs.{k} has {len} entries but the graph has {entries} node entries"
                )));
            }
        }
        // Storage ids number the pool densely; a far larger id is a corrupted graph (and
        // would make us allocate a huge pool table).
        let limit = entries as u64 * 4 + 64;
        if let Some(&sid) = self.storage_id.iter().find(|&&s| s as u64 >= limit) {
            return Err(bad(format!(
                "storage_id {sid} is out of range for a graph of {entries} entries"
            )));
        }
        let check_entry = |e: &NodeEntry, what: &dyn Fn() -> String| -> Result<()> {
            if e.node_id as usize >= n {
                return Err(bad(format!(
                    "{} refers to node {} but the graph has {n} nodes",
                    what(),
                    e.node_id
                )));
            }
            let outs = self.num_outputs_of(e.node_id as usize);
            if e.index >= outs {
                return Err(bad(format!(
                    "{} refers to output {} of node '{}', which has {outs} outputs",
                    what(),
                    e.index,
                    self.nodes[e.node_id as usize].name
                )));
            }
            Ok(())
        };
        for (nid, node) in self.nodes.iter().enumerate() {
            for (i, e) in node.inputs.iter().enumerate() {
                check_entry(e, &|| format!("input {i} of node '{}'", node.name))?;
                if node.op_type == OpType::TvmOp && e.node_id as usize >= nid {
                    return Err(bad(format!(
                        "input {i} of node '{}' comes from node {} which does not run before it",
                        node.name, e.node_id
                    )));
                }
            }
            let outs = self.num_outputs_of(nid);
            if node.op_type == OpType::TvmOp {
                if node.param.num_outputs != outs {
                    return Err(bad(format!(
                        "node '{}' declares {} outputs but node_row_ptr gives it {outs}",
                        node.name, node.param.num_outputs
                    )));
                }
                let f = node.param.func_name.as_str();
                if f == "__copy" && (node.inputs.len() != 1 || outs != 1) {
                    return Err(bad(format!(
                        "__copy node '{}' must have one input and one output",
                        node.name
                    )));
                }
                if f == "__nop" && node.inputs.is_empty() {
                    return Err(bad(format!("__nop node '{}' has no input", node.name)));
                }
            } else if outs == 0 {
                return Err(bad(format!(
                    "input node '{}' has no output entry",
                    node.name
                )));
            }
        }
        for (i, &nid) in self.input_nodes.iter().enumerate() {
            if nid as usize >= n {
                return Err(bad(format!(
                    "arg_nodes[{i}] = {nid} but the graph has {n} nodes"
                )));
            }
        }
        for (i, e) in self.outputs.iter().enumerate() {
            check_entry(e, &|| format!("heads[{i}]"))?;
        }
        for (i, s) in self.shape.iter().enumerate() {
            crate::ndarray::checked_nbytes(s, self.dltype[i])
                .map_err(|e| bad(format!("entry {i}: {}", e.message)))?;
        }
        Ok(())
    }

    /// Number of node entries (outputs of all nodes).
    pub fn num_entries(&self) -> usize {
        *self.node_row_ptr.last().unwrap_or(&0) as usize
    }

    /// Number of outputs of node `nid` (from the row pointers).
    pub fn num_outputs_of(&self, nid: usize) -> u32 {
        self.node_row_ptr[nid + 1] - self.node_row_ptr[nid]
    }

    /// Entry id of output `index` of node `nid`.
    #[inline]
    pub fn entry_id(&self, nid: u32, index: u32) -> usize {
        (self.node_row_ptr[nid as usize] + index) as usize
    }

    /// Entry id of a node entry.
    #[inline]
    pub fn eid(&self, e: NodeEntry) -> usize {
        self.entry_id(e.node_id, e.index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = r#"{
      "nodes": [
        {"op": "null", "name": "x", "inputs": []},
        {"op": "tvm_op", "name": "f", "attrs": {"func_name": "add_one", "num_inputs": "1",
          "num_outputs": "1", "flatten_data": "0", "hash": "abc"}, "inputs": [[0, 0, 0]]}
      ],
      "arg_nodes": [0],
      "heads": [[1, 0, 0]],
      "attrs": {
        "dltype": ["list_str", ["float32", "float32"]],
        "storage_id": ["list_int", [0, 1]],
        "shape": ["list_shape", [[2, 3], [2, 3]]],
        "device_index": ["list_int", [1, 1]]
      },
      "node_row_ptr": [0, 1, 2]
    }"#;

    #[test]
    fn parses() {
        let g = Graph::parse(OK).unwrap();
        assert_eq!(g.nodes.len(), 2);
        assert_eq!(g.num_entries(), 2);
        assert_eq!(g.nodes[1].param.func_name, "add_one");
        assert_eq!(g.nodes[1].param.attrs["hash"], "abc");
        assert_eq!(g.shape[1], vec![2, 3]);
        assert_eq!(g.device_index.as_deref(), Some(&[1, 1][..]));
    }

    #[test]
    fn errors_are_named() {
        let e = Graph::parse("{").unwrap_err();
        assert!(e.message.contains("cannot parse graph JSON"), "{e}");
        let e = Graph::parse(&OK.replace("[0, 1, 2]", "[0, 1]")).unwrap_err();
        assert!(e.message.contains("node_row_ptr"), "{e}");
        let e = Graph::parse(&OK.replace("[[0, 0, 0]]", "[[5, 0, 0]]")).unwrap_err();
        assert!(e.message.contains("refers to node 5"), "{e}");
        let e = Graph::parse(&OK.replace("\"float32\", \"float32\"", "\"float32\"")).unwrap_err();
        assert!(e.message.contains("attrs.dltype"), "{e}");
        let e = Graph::parse(&OK.replace("\"tvm_op\"", "\"weird\"")).unwrap_err();
        assert!(e.message.contains("weird"), "{e}");
        let e = Graph::parse(&OK.replace("[[2, 3], [2, 3]]", "[[2, -3], [2, 3]]")).unwrap_err();
        assert!(e.message.contains("non-negative"), "{e}");
        let e = Graph::parse(&OK.replace("[0, 1]]", "[0, 100000]]")).unwrap_err();
        assert!(e.message.contains("storage_id"), "{e}");
    }
}
