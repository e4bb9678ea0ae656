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
use std::fmt;

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
    /// The other attributes (`hash`, layouts, ...), as strings, by name in byte order (as
    /// a map iterates them; the names are distinct).
    pub attrs: Vec<(String, String)>,
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

/// The one constructor of "invalid graph JSON: ..." errors (cold, out of line: the many
/// error sites only pass their arguments).
#[cold]
#[inline(never)]
fn bad(a: fmt::Arguments<'_>) -> Error {
    Error::value_fmt(format_args!("invalid graph JSON: {a}"))
}

/// What a checked value is, for error messages; displayed only when a check fails.
#[derive(Clone, Copy)]
enum Ctx<'a> {
    /// A fixed name (`nodes`, `arg_nodes entry`, ...).
    S(&'a str),
    /// `attrs.{key}`.
    Attr(&'a str),
    /// `attrs.shape[{i}]`.
    Shape(usize),
    /// `heads[{i}]`.
    Head(usize),
    /// `node '{name}': inputs`.
    Inputs(&'a str),
    /// `node '{name}': input {i}`.
    Input(&'a str, usize),
    /// `input {i} of node '{name}'`.
    InputOf(&'a str, usize),
}

impl fmt::Display for Ctx<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Ctx::S(s) => f.write_str(s),
            Ctx::Attr(k) => write!(f, "attrs.{k}"),
            Ctx::Shape(i) => write!(f, "attrs.shape[{i}]"),
            Ctx::Head(i) => write!(f, "heads[{i}]"),
            Ctx::Inputs(n) => write!(f, "node '{n}': inputs"),
            Ctx::Input(n, i) => write!(f, "node '{n}': input {i}"),
            Ctx::InputOf(n, i) => write!(f, "input {i} of node '{n}'"),
        }
    }
}

/// `v` as a `u32`; the error names `what` followed by `suffix`.
fn as_u32(v: &Value, what: Ctx<'_>, suffix: &str) -> Result<u32> {
    match v.as_u64() {
        Some(x) if x <= u32::MAX as u64 => Ok(x as u32),
        _ => Err(bad(format_args!(
            "{what}{suffix} must be a non-negative integer, got {v}"
        ))),
    }
}

fn as_array<'a>(v: &'a Value, what: Ctx<'_>) -> Result<&'a [Value]> {
    match v {
        Value::Array(a) => Ok(a),
        _ => Err(bad(format_args!("{what} must be a list"))),
    }
}

/// Reads a list of `u32`s into `out` (empty); each failing entry is named `what`. (The
/// lists are read into the graph in place, not returned and moved.)
fn u32_list(a: &[Value], what: &str, out: &mut Vec<u32>) -> Result<()> {
    out.reserve_exact(a.len());
    for v in a {
        out.push(as_u32(v, Ctx::S(what), "")?);
    }
    Ok(())
}

/// Reads the strings of `attrs.{key}` into `out` (empty).
fn str_list(a: &[Value], key: &str, out: &mut Vec<String>) -> Result<()> {
    out.reserve_exact(a.len());
    for v in a {
        match v {
            Value::String(s) => out.push(s.clone()),
            _ => return Err(bad(format_args!("attrs.{key} entries must be strings"))),
        }
    }
    Ok(())
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
    match crate::packed_func::text::parse_dec(s.trim_ascii(), u32::MAX) {
        Some(x) => Ok(x),
        None => Err(bad(format_args!(
            "node '{node}': attribute {key} must be a non-negative integer, got {v}"
        ))),
    }
}

fn parse_entry(v: &Value, what: Ctx<'_>) -> Result<NodeEntry> {
    let a = as_array(v, what)?;
    if a.len() < 2 || a.len() > 3 {
        return Err(bad(format_args!(
            "{what} must be [node_id, index] or [node_id, index, version], got {v}"
        )));
    }
    Ok(NodeEntry {
        node_id: as_u32(&a[0], what, ": node id")?,
        index: as_u32(&a[1], what, ": output index")?,
    })
}

/// Reads node `nid` and appends it to `out`.
#[inline(never)]
fn parse_node(nid: usize, v: &Value, out: &mut Vec<Node>) -> Result<()> {
    let Some(obj) = v.as_object() else {
        return Err(bad(format_args!("node {nid} must be an object")));
    };
    // The fields a node may have, found in one pass (the checks below keep their order).
    let (mut op, mut name, mut inputs, mut attrs, mut attr) = (None, None, None, None, None);
    for (k, v) in obj {
        match k.as_str() {
            "op" => op = Some(v),
            "name" => name = Some(v),
            "inputs" => inputs = Some(v),
            "attrs" => attrs = Some(v),
            "attr" => attr = Some(v),
            _ => {}
        }
    }
    let Some(op) = op.and_then(Value::as_str) else {
        return Err(bad(format_args!("node {nid} has no \"op\" string")));
    };
    let Some(name) = name.and_then(Value::as_str) else {
        return Err(bad(format_args!("node {nid} has no \"name\" string")));
    };
    let op_type = match op {
        "null" => OpType::Null,
        "tvm_op" => OpType::TvmOp,
        other => {
            return Err(bad(format_args!(
                "node {nid} ('{name}') has op type '{other}': only \"null\" and \"tvm_op\" \
                 nodes can be executed"
            )))
        }
    };
    // One owned value from here on, so that every early return drops just it.
    let mut node = Node {
        op_type,
        name: String::new(),
        inputs: Vec::new(),
        param: OpParam {
            num_outputs: 1,
            ..OpParam::default()
        },
    };
    if let Some(ins) = inputs {
        let ins = as_array(ins, Ctx::Inputs(name))?;
        node.inputs.reserve_exact(ins.len());
        for (i, e) in ins.iter().enumerate() {
            node.inputs.push(parse_entry(e, Ctx::Input(name, i))?);
        }
    } else if node.op_type == OpType::TvmOp {
        return Err(bad(format_args!("node {nid} ('{name}') has no \"inputs\"")));
    }
    let param = &mut node.param;
    param.num_inputs = node.inputs.len() as u32;
    let attrs = attrs.or(attr);
    let mut has_func = false;
    if let Some(attrs) = attrs {
        let Some(attrs) = attrs.as_object() else {
            return Err(bad(format_args!("node '{name}': attrs must be an object")));
        };
        for (k, v) in attrs {
            match k.as_str() {
                "func_name" => {
                    param.func_name = attr_string(v);
                    has_func = true;
                }
                "num_inputs" => param.num_inputs = attr_uint(v, k, name)?,
                "num_outputs" => param.num_outputs = attr_uint(v, k, name)?,
                "flatten_data" => param.flatten_data = attr_uint(v, k, name)? != 0,
                _ => {
                    // The object's keys come sorted and distinct.
                    param.attrs.push((k.clone(), attr_string(v)));
                }
            }
        }
    }
    if node.op_type == OpType::TvmOp && !has_func {
        return Err(bad(format_args!(
            "node {nid} ('{name}') is a tvm_op without a func_name attribute"
        )));
    }
    node.name = name.to_string();
    out.push(node);
    Ok(())
}

/// Reads one graph attribute `["<type>", <list>]`, checking the type tag.
fn typed_list<'a>(attrs: &'a Map, key: &str, tag: &str) -> Result<Option<&'a [Value]>> {
    let Some(v) = attrs.get(key) else {
        return Ok(None);
    };
    let pair = match v {
        Value::Array(a) if a.len() == 2 => a,
        _ => return Err(bad(format_args!("attrs.{key} must be [\"{tag}\", [...]]"))),
    };
    if pair[0].as_str() != Some(tag) {
        return Err(bad(format_args!(
            "attrs.{key} must be tagged \"{tag}\", got {}",
            pair[0]
        )));
    }
    Ok(Some(as_array(&pair[1], Ctx::Attr(key))?))
}

/// A graph attribute that must be there.
fn need_list<'a>(attrs: &'a Map, key: &str, tag: &str) -> Result<&'a [Value]> {
    match typed_list(attrs, key, tag)? {
        Some(l) => Ok(l),
        None => Err(bad(format_args!("attrs has no \"{key}\""))),
    }
}

/// A top-level field that must be there.
fn field<'a>(obj: &'a Map, key: &str) -> Result<&'a Value> {
    match obj.get(key) {
        Some(v) => Ok(v),
        None => Err(bad(format_args!("missing \"{key}\""))),
    }
}

/// A top-level field that must be a list.
fn field_list<'a>(obj: &'a Map, key: &str) -> Result<&'a [Value]> {
    as_array(field(obj, key)?, Ctx::S(key))
}

#[inline(never)]
fn parse_json(json: &str) -> std::result::Result<Value, crate::packed_func::json::ParseError> {
    crate::packed_func::json::parse(json)
}

impl Graph {
    /// Parses and validates a graph.
    pub fn parse(json: &str) -> Result<Graph> {
        let mut g = Graph::empty();
        g.read(json)?;
        Ok(g)
    }

    /// A graph with nothing in it, for [`Graph::read`].
    pub(crate) fn empty() -> Graph {
        Graph {
            nodes: Vec::new(),
            input_nodes: Vec::new(),
            outputs: Vec::new(),
            node_row_ptr: Vec::new(),
            dltype: Vec::new(),
            dltype_names: Vec::new(),
            storage_id: Vec::new(),
            device_index: None,
            storage_scope: None,
            shape: Vec::new(),
        }
    }

    /// [`Graph::parse`] into an empty graph, filled in place (not returned and moved); on an
    /// error it holds what was read so far.
    pub(crate) fn read(&mut self, json: &str) -> Result<()> {
        let root = parse_json(json)
            .map_err(|e| Error::tvm_fmt(format_args!("cannot parse graph JSON: {e}")))?;
        let Some(obj) = root.as_object() else {
            return Err(bad(format_args!("the top level must be an object")));
        };
        let g = self;
        let list = field_list(obj, "nodes")?;
        g.nodes.reserve_exact(list.len());
        for (i, n) in list.iter().enumerate() {
            parse_node(i, n, &mut g.nodes)?;
        }
        if g.nodes.len() >= u32::MAX as usize {
            return Err(bad(format_args!("too many nodes")));
        }
        u32_list(
            field_list(obj, "arg_nodes")?,
            "arg_nodes entry",
            &mut g.input_nodes,
        )?;
        u32_list(
            field_list(obj, "node_row_ptr")?,
            "node_row_ptr entry",
            &mut g.node_row_ptr,
        )?;
        let list = field_list(obj, "heads")?;
        g.outputs.reserve_exact(list.len());
        for (i, v) in list.iter().enumerate() {
            g.outputs.push(parse_entry(v, Ctx::Head(i))?);
        }

        let Some(attrs) = field(obj, "attrs")?.as_object() else {
            return Err(bad(format_args!("attrs must be an object")));
        };
        str_list(
            need_list(attrs, "dltype", "list_str")?,
            "dltype",
            &mut g.dltype_names,
        )?;
        u32_list(
            need_list(attrs, "storage_id", "list_int")?,
            "attrs.storage_id entry",
            &mut g.storage_id,
        )?;
        let list = need_list(attrs, "shape", "list_shape")?;
        g.shape.reserve_exact(list.len());
        for (i, s) in list.iter().enumerate() {
            let dims = as_array(s, Ctx::Shape(i))?;
            let mut v = Vec::with_capacity(dims.len());
            for d in dims {
                match d.as_i64() {
                    Some(x) if x >= 0 => v.push(x),
                    _ => {
                        return Err(bad(format_args!(
                            "attrs.shape[{i}] must hold non-negative integers, got {d}"
                        )))
                    }
                }
            }
            g.shape.push(v);
        }
        if let Some(l) = typed_list(attrs, "device_index", "list_int")? {
            let out = g.device_index.insert(Vec::with_capacity(l.len()));
            for v in l {
                match v.as_i64() {
                    Some(x) if x >= 0 && x <= i32::MAX as i64 => out.push(x as i32),
                    _ => return Err(bad(format_args!("attrs.device_index entry {v} is invalid"))),
                }
            }
        }
        if let Some(l) = typed_list(attrs, "storage_scope", "list_str")? {
            str_list(l, "storage_scope", g.storage_scope.insert(Vec::new()))?;
        }

        g.dltype.reserve_exact(g.dltype_names.len());
        for s in &g.dltype_names {
            match dtype_from_string(s) {
                Ok(t) => g.dltype.push(t),
                Err(e) => return Err(bad(format_args!("{}", e.message))),
            }
        }

        g.validate()
    }

    /// Checks that `e` names an existing output of an existing node.
    fn check_entry(&self, e: &NodeEntry, what: Ctx<'_>) -> Result<()> {
        let n = self.nodes.len();
        if e.node_id as usize >= n {
            return Err(bad(format_args!(
                "{what} refers to node {} but the graph has {n} nodes",
                e.node_id
            )));
        }
        let outs = self.num_outputs_of(e.node_id as usize);
        if e.index >= outs {
            return Err(bad(format_args!(
                "{what} refers to output {} of node '{}', which has {outs} outputs",
                e.index,
                self.node_name(e.node_id)
            )));
        }
        Ok(())
    }

    #[inline(never)]
    fn validate(&self) -> Result<()> {
        let n = self.nodes.len();
        if self.node_row_ptr.len() != n + 1 {
            return Err(bad(format_args!(
                "node_row_ptr has {} entries but the graph has {n} nodes (expected {})",
                self.node_row_ptr.len(),
                n + 1
            )));
        }
        if self.node_row_ptr[0] != 0 {
            return Err(bad(format_args!("node_row_ptr must start at 0")));
        }
        for w in self.node_row_ptr.windows(2) {
            if w[1] < w[0] {
                return Err(bad(format_args!("node_row_ptr must be non-decreasing")));
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
                return Err(bad(format_args!(
                    "attrs.{k} has {len} entries but the graph has {entries} node entries"
                )));
            }
        }
        // Storage ids number the pool densely; a far larger id is a corrupted graph (and
        // would make us allocate a huge pool table).
        let limit = entries as u64 * 4 + 64;
        for &sid in &self.storage_id {
            if sid as u64 >= limit {
                return Err(bad(format_args!(
                    "storage_id {sid} is out of range for a graph of {entries} entries"
                )));
            }
        }
        for (nid, node) in self.nodes.iter().enumerate() {
            let name = node.name.as_str();
            for (i, e) in node.inputs.iter().enumerate() {
                self.check_entry(e, Ctx::InputOf(name, i))?;
                if node.op_type == OpType::TvmOp && e.node_id as usize >= nid {
                    return Err(bad(format_args!(
                        "input {i} of node '{name}' comes from node {} which does not run \
                         before it",
                        e.node_id
                    )));
                }
            }
            let outs = self.num_outputs_of(nid);
            if node.op_type == OpType::TvmOp {
                if node.param.num_outputs != outs {
                    return Err(bad(format_args!(
                        "node '{name}' declares {} outputs but node_row_ptr gives it {outs}",
                        node.param.num_outputs
                    )));
                }
                let f = node.param.func_name.as_str();
                if f == "__copy" && (node.inputs.len() != 1 || outs != 1) {
                    return Err(bad(format_args!(
                        "__copy node '{name}' must have one input and one output"
                    )));
                }
                if f == "__nop" && node.inputs.is_empty() {
                    return Err(bad(format_args!("__nop node '{name}' has no input")));
                }
            } else if outs == 0 {
                return Err(bad(format_args!("input node '{name}' has no output entry")));
            }
        }
        for (i, &nid) in self.input_nodes.iter().enumerate() {
            if nid as usize >= n {
                return Err(bad(format_args!(
                    "arg_nodes[{i}] = {nid} but the graph has {n} nodes"
                )));
            }
        }
        for (i, e) in self.outputs.iter().enumerate() {
            self.check_entry(e, Ctx::Head(i))?;
        }
        for (i, (s, &t)) in self.shape.iter().zip(&self.dltype).enumerate() {
            if let Err(e) = crate::ndarray::checked_nbytes(s, t) {
                return Err(bad(format_args!("entry {i}: {}", e.message)));
            }
        }
        Ok(())
    }

    /// Number of node entries (outputs of all nodes).
    pub fn num_entries(&self) -> usize {
        *self.node_row_ptr.last().unwrap_or(&0) as usize
    }

    /// Number of outputs of node `nid` (from the row pointers; 0 for a node it lacks).
    pub fn num_outputs_of(&self, nid: usize) -> u32 {
        match self.node_row_ptr.get(nid..nid + 2) {
            Some(&[a, b]) => b - a,
            _ => 0,
        }
    }

    /// The shape of entry `eid` (empty for an entry it lacks).
    pub(crate) fn entry_shape(&self, eid: usize) -> &[i64] {
        self.shape.get(eid).map_or(&[], |s| s)
    }

    /// The name of node `nid` (`""` for a node it lacks).
    pub(crate) fn node_name(&self, nid: u32) -> &str {
        self.nodes.get(nid as usize).map_or("", |n| &n.name)
    }

    /// The name of input `i` (`""` for an input it lacks).
    pub(crate) fn input_name(&self, i: usize) -> &str {
        self.input_nodes
            .get(i)
            .map_or("", |&nid| self.node_name(nid))
    }

    /// Entry id of output `index` of node `nid` (`usize::MAX`, an id no entry has, for a node
    /// the graph lacks).
    #[inline]
    pub fn entry_id(&self, nid: u32, index: u32) -> usize {
        match self.node_row_ptr.get(nid as usize) {
            Some(&first) => (first + index) as usize,
            None => usize::MAX,
        }
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
        assert_eq!(g.nodes[1].param.attrs, [("hash".into(), "abc".into())]);
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
    /// From `f`'s function name to the end of its inputs.
    const SPAN: &str = "\"add_one\", \"num_inputs\": \"1\",\n          \"num_outputs\": \"1\", \
                        \"flatten_data\": \"0\", \"hash\": \"abc\"}, \"inputs\": [[0, 0, 0]]";

    /// (search, replacement) edits of `OK`, each making one graph error.
    const BAD_EDITS: &[(&str, &str)] = &[
        ("{\n      \"nodes\"", "[{\n      \"nodes\""),
        ("\"nodes\": [", "\"nodez\": ["),
        ("\"nodes\": [", "\"nodes\": 3, \"x\": ["),
        ("{\"op\": \"null\", \"name\": \"x\", \"inputs\": []}", "7"),
        ("{\"op\": \"null\", ", "{"),
        ("\"name\": \"x\", ", "\"name\": 5, "),
        ("\"tvm_op\"", "\"weird\""),
        (", \"inputs\": [[0, 0, 0]]", ""),
        ("\"inputs\": [[0, 0, 0]]", "\"inputs\": 4"),
        ("[[0, 0, 0]]", "[[0]]"),
        ("[[0, 0, 0]]", "[[-1, 0, 0]]"),
        ("[[0, 0, 0]]", "[[0, \"a\", 0]]"),
        ("\"attrs\": {\"func_name\"", "\"attrs\": 1, \"attr\": {\"func_name\""),
        ("\"num_inputs\": \"1\"", "\"num_inputs\": \"x\""),
        ("\"flatten_data\": \"0\"", "\"flatten_data\": -1"),
        ("\"func_name\": \"add_one\", ", ""),
        ("\"arg_nodes\": [0]", "\"arg_nodes\": [0.5]"),
        ("\"arg_nodes\": [0]", "\"arg_nodes\": {}"),
        ("\"heads\": [[1, 0, 0]]", "\"heads\": [[1, 0, 0], 3]"),
        ("\"heads\": [[1, 0, 0]]", "\"heads\": [[1, 0, 0], [1, 7]]"),
        ("\"heads\": [[1, 0, 0]]", "\"heads\": [[9, 0]]"),
        ("\"node_row_ptr\": [0, 1, 2]", "\"node_row_ptr\": [0, 1, -2]"),
        ("\"node_row_ptr\": [0, 1, 2]", "\"node_row_ptr\": [1, 1, 2]"),
        ("\"node_row_ptr\": [0, 1, 2]", "\"node_row_ptr\": [0, 2, 1]"),
        ("\"node_row_ptr\": [0, 1, 2]", "\"node_row_ptr\": [0, 1, 3]"),
        ("\"node_row_ptr\": [0, 1, 2]", "\"node_row_ptr\": [0, 0, 1]"),
        ("\"attrs\": {\n        \"dltype\"", "\"attrs\": 2, \"x\": {\n        \"dltype\""),
        ("\"dltype\": [\"list_str\", [\"float32\", \"float32\"]]", "\"dltype\": [\"list_str\"]"),
        ("\"dltype\": [\"list_str\", [\"float32\", \"float32\"]]", "\"dltype\": [\"list_int\", []]"),
        ("\"dltype\": [\"list_str\", [\"float32\", \"float32\"]]", "\"dltype\": [\"list_str\", 3]"),
        ("\"dltype\": [\"list_str\", [\"float32\", \"float32\"]]", "\"dltype\": [\"list_str\", [1, 2]]"),
        ("\"dltype\": [\"list_str\", [\"float32\", \"float32\"]]", "\"dltype\": [\"list_str\", [\"float32\", \"flt\"]]"),
        ("\"dltype\": [\"list_str\", [\"float32\", \"float32\"]]", "\"dltype\": [\"list_str\", [\"float32\"]]"),
        ("\"dltype\": [\"list_str\", [\"float32\", \"float32\"]],", ""),
        ("\"storage_id\": [\"list_int\", [0, 1]]", "\"storage_id\": [\"list_int\", [0, \"a\"]]"),
        ("\"storage_id\": [\"list_int\", [0, 1]]", "\"storage_id\": [\"list_int\", [0, 100000]]"),
        ("[[2, 3], [2, 3]]", "[[2, 3], 5]"),
        ("[[2, 3], [2, 3]]", "[[2, 3], [2, -3]]"),
        ("[[2, 3], [2, 3]]", "[[2, 3], [4611686018427387904, 4]]"),
        ("\"device_index\": [\"list_int\", [1, 1]]", "\"device_index\": [\"list_int\", [1, -1]]"),
        ("\"device_index\": [\"list_int\", [1, 1]]", "\"device_index\": [\"list_int\", [1]]"),
        ("\"device_index\": [\"list_int\", [1, 1]]", "\"storage_scope\": [\"list_str\", [\"global\", 1]]"),
        ("\"device_index\": [\"list_int\", [1, 1]]", "\"storage_scope\": [\"list_str\", [\"global\"]]"),
        ("{\"op\": \"null\", \"name\": \"x\", \"inputs\": []}", "{\"op\": \"tvm_op\", \"name\": \"x\", \"inputs\": [[1, 0]], \"attrs\": {\"func_name\": \"f\"}}"),
        (SPAN, "\"__nop\"}, \"inputs\": []"),
        (SPAN, "\"__copy\"}, \"inputs\": [[0, 0, 0], [0, 0]]"),
        ("\"num_outputs\": \"1\"", "\"num_outputs\": \"2\""),
        ("\"arg_nodes\": [0]", "\"arg_nodes\": [0, 5]"),
    ];

    /// Each edit's error, class and message byte for byte as the first implementation
    /// wrote them (Python clients and tests read them).
    const BAD_MESSAGES: &[&str] = &[
        "TVMError: cannot parse graph JSON: unexpected end of input in a list at line 16 column 6 (byte 572)",
        r#"ValueError: invalid graph JSON: missing "nodes""#,
        "ValueError: invalid graph JSON: nodes must be a list",
        "ValueError: invalid graph JSON: node 0 must be an object",
        r#"ValueError: invalid graph JSON: node 0 has no "op" string"#,
        r#"ValueError: invalid graph JSON: node 0 has no "name" string"#,
        r#"ValueError: invalid graph JSON: node 1 ('f') has op type 'weird': only "null" and "tvm_op" nodes can be executed"#,
        r#"ValueError: invalid graph JSON: node 1 ('f') has no "inputs""#,
        "ValueError: invalid graph JSON: node 'f': inputs must be a list",
        "ValueError: invalid graph JSON: node 'f': input 0 must be [node_id, index] or [node_id, index, version], got [0]",
        "ValueError: invalid graph JSON: node 'f': input 0: node id must be a non-negative integer, got -1",
        r#"ValueError: invalid graph JSON: node 'f': input 0: output index must be a non-negative integer, got "a""#,
        "ValueError: invalid graph JSON: node 'f': attrs must be an object",
        r#"ValueError: invalid graph JSON: node 'f': attribute num_inputs must be a non-negative integer, got "x""#,
        "ValueError: invalid graph JSON: node 'f': attribute flatten_data must be a non-negative integer, got -1",
        "ValueError: invalid graph JSON: node 1 ('f') is a tvm_op without a func_name attribute",
        "ValueError: invalid graph JSON: arg_nodes entry must be a non-negative integer, got 0.5",
        "ValueError: invalid graph JSON: arg_nodes must be a list",
        "ValueError: invalid graph JSON: heads[1] must be a list",
        "ValueError: invalid graph JSON: heads[1] refers to output 7 of node 'f', which has 1 outputs",
        "ValueError: invalid graph JSON: heads[0] refers to node 9 but the graph has 2 nodes",
        "ValueError: invalid graph JSON: node_row_ptr entry must be a non-negative integer, got -2",
        "ValueError: invalid graph JSON: node_row_ptr must start at 0",
        "ValueError: invalid graph JSON: node_row_ptr must be non-decreasing",
        "ValueError: invalid graph JSON: attrs.dltype has 2 entries but the graph has 3 node entries",
        "ValueError: invalid graph JSON: attrs.dltype has 2 entries but the graph has 1 node entries",
        "ValueError: invalid graph JSON: attrs must be an object",
        r#"ValueError: invalid graph JSON: attrs.dltype must be ["list_str", [...]]"#,
        r#"ValueError: invalid graph JSON: attrs.dltype must be tagged "list_str", got "list_int""#,
        "ValueError: invalid graph JSON: attrs.dltype must be a list",
        "ValueError: invalid graph JSON: attrs.dltype entries must be strings",
        "ValueError: invalid graph JSON: unknown data type 'flt'",
        "ValueError: invalid graph JSON: attrs.dltype has 1 entries but the graph has 2 node entries",
        r#"ValueError: invalid graph JSON: attrs has no "dltype""#,
        r#"ValueError: invalid graph JSON: attrs.storage_id entry must be a non-negative integer, got "a""#,
        "ValueError: invalid graph JSON: storage_id 100000 is out of range for a graph of 2 entries",
        "ValueError: invalid graph JSON: attrs.shape[1] must be a list",
        "ValueError: invalid graph JSON: attrs.shape[1] must hold non-negative integers, got -3",
        "ValueError: invalid graph JSON: entry 1: shape [4611686018427387904, 4] is too large: its size does not fit the 64-bit address space",
        "ValueError: invalid graph JSON: attrs.device_index entry -1 is invalid",
        "ValueError: invalid graph JSON: attrs.device_index has 1 entries but the graph has 2 node entries",
        "ValueError: invalid graph JSON: attrs.storage_scope entries must be strings",
        "ValueError: invalid graph JSON: attrs.storage_scope has 1 entries but the graph has 2 node entries",
        "ValueError: invalid graph JSON: input 0 of node 'x' comes from node 1 which does not run before it",
        "ValueError: invalid graph JSON: __nop node 'f' has no input",
        "ValueError: invalid graph JSON: __copy node 'f' must have one input and one output",
        "ValueError: invalid graph JSON: node 'f' declares 2 outputs but node_row_ptr gives it 1",
        "ValueError: invalid graph JSON: arg_nodes[1] = 5 but the graph has 2 nodes",
    ];

    #[test]
    fn error_messages_are_unchanged() {
        assert_eq!(BAD_EDITS.len(), BAD_MESSAGES.len());
        for ((a, b), want) in BAD_EDITS.iter().zip(BAD_MESSAGES) {
            assert!(OK.contains(a), "{a}");
            let e = Graph::parse(&OK.replacen(a, b, 1)).unwrap_err();
            assert_eq!(e.to_string(), *want);
        }
    }
}
