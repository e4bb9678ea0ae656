//! JSON for the runtime's own documents: graph JSON, profiling reports, `.tvm_meta.json`
//! and `ndarray-cache.json` metadata, RPC tracker messages.
//!
//! One value type, a reader and a writer, written for small code (no generics, no serde, no
//! tables in the file: float digits come from core's formatting, the powers of ten are
//! computed on first use) and for hostile input: a graph JSON comes from a file or a socket.
//! Reading never panics and never recurses: containers are built on an explicit stack, nested
//! at most [`MAX_DEPTH`] deep, and every error says what is wrong and where (line, column and
//! byte offset).
//!
//! Output is byte for byte what serde_json 1.x (which this module replaces) wrote: compact,
//! object keys sorted (a [`Map`] keeps its entries sorted), integers as integers, floats in the shortest
//! form that reads back (`1.0`, `0.1`, `1e-7`, `1e+16`; fixed notation for decimal exponents
//! -5 to 15), non-finite floats as `null`. Numbers are read the way serde_json read them
//! (without its `float_roundtrip` feature): integers exactly in the `u64`/`i64` range, wider
//! ones and fractions as `f64` from the first 19-20 significant digits and one scaling by a
//! power of ten. That reading is not always correctly rounded (a float with 16 or 17
//! significant digits may come back one unit in the last place off, as it did before);
//! it is kept so that a document the runtime reads and writes back (a profiling report through
//! `FromJSON` and `AsJSON`) stays byte for byte what it was.

use std::fmt::{self, Write as _};
use std::sync::OnceLock;

/// An object: its entries in a list sorted by key, one per key (a repeated key keeps its last
/// value). Objects here are small; a list is a fraction of a B-tree's code, and a document's
/// objects are sorted once when read (no insertion per key, so a hostile object with many
/// keys costs a sort, not a quadratic number of moves).
#[derive(Clone, PartialEq, Default)]
pub struct Map {
    entries: Vec<(String, Value)>,
}

impl Map {
    /// An empty object.
    pub fn new() -> Map {
        Map::default()
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Where `key` is (`Ok`) or would go (`Err`).
    fn find(&self, key: &str) -> Result<usize, usize> {
        self.entries.binary_search_by(|(k, _)| k.as_str().cmp(key))
    }

    /// The value under `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        let i = self.find(key).ok()?;
        self.entries.get(i).map(|e| &e.1)
    }

    /// The value under `key`, to change it.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        let i = self.find(key).ok()?;
        self.entries.get_mut(i).map(|e| &mut e.1)
    }

    /// Whether `key` has a value.
    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }

    /// Sets `key` to `v`; returns the value it replaces.
    pub fn insert(&mut self, key: String, v: Value) -> Option<Value> {
        match self.find(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, v)),
            Err(i) => {
                self.entries.insert(i, (key, v));
                None
            }
        }
    }

    /// Removes `key`; returns its value.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        self.find(key).ok().map(|i| self.entries.remove(i).1)
    }

    /// The entries in key order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&String, &Value)> + ExactSizeIterator {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// The keys in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &String> + ExactSizeIterator {
        self.entries.iter().map(|(k, _)| k)
    }

    /// The values in key order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &Value> + ExactSizeIterator {
        self.entries.iter().map(|(_, v)| v)
    }

    /// An object of entries in any order (a repeated key keeps its last value): sorted once.
    fn from_entries(entries: Vec<(String, Value)>) -> Map {
        if entries.windows(2).all(|w| w[0].0 < w[1].0) {
            return Map { entries };
        }
        Map::sorted(entries)
    }

    /// [`Map::from_entries`] for entries out of order or repeated.
    #[inline(never)]
    fn sorted(entries: Vec<(String, Value)>) -> Map {
        let order = super::order::stable_order(entries.len(), &|a, b| match (
            entries.get(a),
            entries.get(b),
        ) {
            (Some(x), Some(y)) => x.0.cmp(&y.0),
            _ => std::cmp::Ordering::Equal,
        });
        let mut slots: Vec<Option<(String, Value)>> = entries.into_iter().map(Some).collect();
        let mut kept: Vec<(String, Value)> = Vec::with_capacity(slots.len());
        for i in order {
            let Some(e) = slots.get_mut(i).and_then(Option::take) else {
                continue;
            };
            // Of equal keys (adjacent now, in their first order) the last one stays.
            match kept.last_mut() {
                Some(last) if last.0 == e.0 => *last = e,
                _ => kept.push(e),
            }
        }
        Map { entries: kept }
    }
}

/// As a map: `{"key": value, ...}`.
impl fmt::Debug for Map {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl IntoIterator for Map {
    type Item = (String, Value);
    type IntoIter = std::vec::IntoIter<(String, Value)>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

impl<'a> IntoIterator for &'a Map {
    type Item = (&'a String, &'a Value);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (String, Value)>,
        fn(&'a (String, Value)) -> (&'a String, &'a Value),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter().map(|(k, v)| (k, v))
    }
}

impl FromIterator<(String, Value)> for Map {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Map {
        Map::from_entries(iter.into_iter().collect())
    }
}

/// How deep containers may nest (serde_json's limit, kept so that the same documents are
/// accepted): the 128th level is an error.
pub const MAX_DEPTH: usize = 127;

/// A JSON number.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Number {
    /// A non-negative integer.
    U64(u64),
    /// A negative integer.
    I64(i64),
    /// A finite float (a number with a fraction or an exponent, or an integer outside the
    /// 64-bit ranges).
    F64(f64),
}

/// A JSON value.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum Value {
    /// `null`.
    #[default]
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number.
    Number(Number),
    /// A string.
    String(String),
    /// A list.
    Array(Vec<Value>),
    /// An object.
    Object(Map),
}

static NULL: Value = Value::Null;

/// An object from its entries (a repeated key keeps its last value).
pub fn object(entries: Vec<(&str, Value)>) -> Value {
    let mut m = Map::new();
    for (k, v) in entries {
        m.insert(k.to_string(), v);
    }
    Value::Object(m)
}

impl Value {
    /// The object's entries, if this is an object.
    pub fn as_object(&self) -> Option<&Map> {
        match self {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }

    /// The list's items, if this is a list.
    pub fn as_array(&self) -> Option<&Vec<Value>> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The string, if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The number, if it is an integer that fits a `u64`.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Number(Number::U64(n)) => Some(*n),
            Value::Number(Number::I64(n)) => u64::try_from(*n).ok(),
            _ => None,
        }
    }

    /// The number, if it is an integer that fits an `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Number(Number::U64(n)) => i64::try_from(*n).ok(),
            Value::Number(Number::I64(n)) => Some(*n),
            _ => None,
        }
    }

    /// The number as a float (integers converted), if this is a number.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(Number::U64(n)) => Some(*n as f64),
            Value::Number(Number::I64(n)) => Some(*n as f64),
            Value::Number(Number::F64(f)) => Some(*f),
            _ => None,
        }
    }

    /// Whether this is an object.
    pub fn is_object(&self) -> bool {
        matches!(self, Value::Object(_))
    }

    /// Whether this is a list.
    pub fn is_array(&self) -> bool {
        matches!(self, Value::Array(_))
    }

    /// The value under `key`, if this is an object that has it.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_object()?.get(key)
    }

    /// Appends the compact JSON text of the value.
    pub fn write_to(&self, out: &mut String) {
        match self {
            Value::Null => put_str(out, "null"),
            Value::Bool(b) => put_str(out, if *b { "true" } else { "false" }),
            Value::Number(n) => write_number(*n, out),
            Value::String(s) => write_string(s, out),
            Value::Array(items) => {
                put(out, b'[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        put(out, b',');
                    }
                    v.write_to(out);
                }
                put(out, b']');
            }
            Value::Object(m) => {
                put(out, b'{');
                for (i, (k, v)) in m.iter().enumerate() {
                    if i > 0 {
                        put(out, b',');
                    }
                    write_string(k, out);
                    put(out, b':');
                    v.write_to(out);
                }
                put(out, b'}');
            }
        }
    }
}

/// `v["key"]`: the value under the key, or `null` when there is none or `v` is not an object.
impl std::ops::Index<&str> for Value {
    type Output = Value;
    fn index(&self, key: &str) -> &Value {
        self.get(key).unwrap_or(&NULL)
    }
}

/// `v[i]`: the list's item, or `null` when there is none or `v` is not a list.
impl std::ops::Index<usize> for Value {
    type Output = Value;
    fn index(&self, i: usize) -> &Value {
        self.as_array().and_then(|a| a.get(i)).unwrap_or(&NULL)
    }
}

/// The compact JSON text (the writer's output, as `to_string()` gives it).
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        self.write_to(&mut s);
        f.write_str(&s)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::String(s)
    }
}

impl From<u64> for Value {
    fn from(n: u64) -> Value {
        Value::Number(Number::U64(n))
    }
}

impl From<u32> for Value {
    fn from(n: u32) -> Value {
        Value::Number(Number::U64(n.into()))
    }
}

impl From<u16> for Value {
    fn from(n: u16) -> Value {
        Value::Number(Number::U64(n.into()))
    }
}

impl From<usize> for Value {
    fn from(n: usize) -> Value {
        Value::Number(Number::U64(n as u64))
    }
}

impl From<i64> for Value {
    fn from(n: i64) -> Value {
        Value::Number(match u64::try_from(n) {
            Ok(u) => Number::U64(u),
            Err(_) => Number::I64(n),
        })
    }
}

impl From<i32> for Value {
    fn from(n: i32) -> Value {
        Value::from(i64::from(n))
    }
}

/// A finite float is a number; NaN and the infinities are `null` (JSON has no word for them).
impl From<f64> for Value {
    fn from(f: f64) -> Value {
        if f.is_finite() {
            Value::Number(Number::F64(f))
        } else {
            Value::Null
        }
    }
}

impl From<Vec<Value>> for Value {
    fn from(items: Vec<Value>) -> Value {
        Value::Array(items)
    }
}

impl From<Map> for Value {
    fn from(m: Map) -> Value {
        Value::Object(m)
    }
}

// ---------------------------------------------------------------------------------------
// Writer

/// Appends `s` as a JSON string: `"` and `\` escaped, control characters as `\n`-style or
/// `\u00xx` escapes, everything else as it is.
pub(crate) fn write_string(s: &str, out: &mut String) {
    put(out, b'"');
    let mut run = 0;
    for (i, &b) in s.as_bytes().iter().enumerate() {
        let short = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0..=0x1f => "",
            _ => continue,
        };
        // Escapes replace ASCII bytes only, so `run..i` lies on character boundaries.
        put_str(out, s.get(run..i).unwrap_or_default());
        if short.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            put_str(out, "\\u00");
            put(out, HEX[(b >> 4) as usize]);
            put(out, HEX[(b & 15) as usize]);
        } else {
            put_str(out, short);
        }
        run = i + 1;
    }
    put_str(out, s.get(run..).unwrap_or_default());
    put(out, b'"');
}

/// Appends one ASCII character (out of line: the writer's many one-character appends share
/// one copy of `String::push`).
#[inline(never)]
pub(crate) fn put(out: &mut String, c: u8) {
    out.push(char::from(c));
}

/// Appends ASCII digits.
#[inline(never)]
fn put_ascii(out: &mut String, b: &[u8]) {
    put_str(out, std::str::from_utf8(b).unwrap_or_default());
}

/// Appends a string (out of line, for the same reason as [`put`]).
pub(crate) use super::text::push as put_str;

fn write_number(n: Number, out: &mut String) {
    match n {
        Number::U64(u) => {
            let _ = write!(out, "{u}");
        }
        Number::I64(i) => {
            let _ = write!(out, "{i}");
        }
        Number::F64(f) => write_f64(f, out),
    }
}

/// Appends a float in the shortest form that reads back to it, laid out as serde_json laid
/// it out: fixed notation with at least one fraction digit for decimal exponents -5 to 15
/// (`0.00001`, `1.0`, `1000000000000000.0`), otherwise `d.ddde±x` (`1e-6`, `1e+16`).
/// Non-finite values are `null`.
fn write_f64(f: f64, out: &mut String) {
    if !f.is_finite() {
        put_str(out, "null");
        return;
    }
    if f.is_sign_negative() {
        put(out, b'-');
    }
    let a = f.abs();
    if a == 0.0 {
        put_str(out, "0.0");
        return;
    }
    // The shortest round-trip digits (the ones core prints), the first one's power of ten.
    let (mut digits, n, k) = super::float_text::shortest(a);
    let exp = k - 1;
    // Between two equally near shortest forms core takes the upper, serde_json the even one.
    if is_even_tie_below(a, &digits[..n], exp - n as i32) {
        digits[n - 1] -= 1;
    }
    let d = &digits[..n];
    let n = n as i32;
    if (-5..=15).contains(&exp) {
        if n - 1 <= exp {
            // 1234e7 -> 12340000000.0
            put_ascii(out, d);
            for _ in 0..exp + 1 - n {
                put(out, b'0');
            }
            put_str(out, ".0");
        } else if exp >= 0 {
            // 1234e-2 -> 12.34
            let (int, frac) = d.split_at(exp as usize + 1);
            put_ascii(out, int);
            put(out, b'.');
            put_ascii(out, frac);
        } else {
            // 1234e-6 -> 0.001234
            put_str(out, "0.");
            for _ in 0..-exp - 1 {
                put(out, b'0');
            }
            put_ascii(out, d);
        }
    } else {
        put_ascii(out, &d[..1]);
        if n > 1 {
            put(out, b'.');
            put_ascii(out, &d[1..]);
        }
        let _ = write!(
            out,
            "e{}{}",
            if exp < 0 { '-' } else { '+' },
            exp.unsigned_abs()
        );
    }
}

/// Whether `v` (positive, finite) lies exactly halfway between the decimal `digits × 10^(k+1)`
/// and the one a unit of its last digit below, that last digit is odd, and the lower one
/// still reads back to `v`: then the even, lower form is the one to write.
fn is_even_tie_below(v: f64, digits: &[u8], k: i32) -> bool {
    if digits.last().is_none_or(|&c| (c - b'0') % 2 == 0) {
        return false;
    }
    let mut dv: u128 = 0;
    for &c in digits {
        dv = dv * 10 + u128::from(c - b'0');
    }
    // The midpoint is a × 10^k.
    let a = dv * 10 - 5;
    let bits = v.to_bits();
    let biased = (bits >> 52) as i32;
    let frac = u128::from(bits & ((1 << 52) - 1));
    let (m, q) = if biased == 0 {
        (frac, -1074)
    } else {
        (frac | 1 << 52, biased - 1075)
    };
    // Is m × 2^q = a × 5^k × 2^k? The odd parts must agree, and m has at most 53 bits and
    // `a` fewer than 60, which bounds k.
    let (x, xs, y, ys) = if k >= 0 {
        if k > 22 {
            return false;
        }
        (m, q, a * pow5(k.unsigned_abs()), k)
    } else {
        if -k > 25 {
            return false;
        }
        (m * pow5(k.unsigned_abs()), q, a, k)
    };
    let (tx, ty) = (x.trailing_zeros() as i32, y.trailing_zeros() as i32);
    if x >> tx != y >> ty || xs + tx != ys + ty {
        return false;
    }
    // Just above a power of two the gap below is half the gap above: the lower form reads
    // back only if it is within a quarter of the upper gap, 5 × 10^k ≤ 2^(q-2), that is
    // 5^(k+1) ≤ 2^(q-2-k).
    if m == 1 << 52 && biased > 1 {
        let (b, c) = (k + 1, q - 2 - k);
        return match (b >= 0, c >= 0) {
            (true, true) => c >= 127 || pow5(b.unsigned_abs()) <= 1u128 << c,
            (true, false) => false,
            (false, true) => true,
            (false, false) => -c < 127 && (1u128 << -c) <= pow5(b.unsigned_abs()),
        };
    }
    true
}

/// 5^e, for the small exponents above (at most 25: no overflow).
#[inline(never)]
fn pow5(e: u32) -> u128 {
    let mut r: u128 = 1;
    for _ in 0..e {
        r *= 5;
    }
    r
}

// ---------------------------------------------------------------------------------------
// Reader

/// Why a document could not be read, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// What is wrong.
    pub what: &'static str,
    /// The byte offset it was found at.
    pub offset: usize,
    /// The line (from 1).
    pub line: usize,
    /// The column in bytes (from 1).
    pub column: usize,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at line {} column {} (byte {})",
            self.what, self.line, self.column, self.offset
        )
    }
}

impl std::error::Error for ParseError {}

/// Reads one JSON document (surrounding whitespace allowed, nothing else after it).
pub fn parse(text: &str) -> Result<Value, ParseError> {
    let mut r = Reader {
        s: text,
        b: text.as_bytes(),
        pos: 0,
    };
    r.document()
}

/// [`parse`] for bytes, which must be UTF-8.
pub fn parse_bytes(bytes: &[u8]) -> Result<Value, ParseError> {
    match std::str::from_utf8(bytes) {
        Ok(text) => parse(text),
        Err(e) => {
            let r = Reader {
                s: "",
                b: bytes,
                pos: e.valid_up_to(),
            };
            Err(r.error("invalid UTF-8"))
        }
    }
}

/// An open container while reading.
enum Frame {
    List(Vec<Value>),
    /// The entries so far (in document order) and the key of the value being read.
    Object(Vec<(String, Value)>, String),
}

struct Reader<'a> {
    s: &'a str,
    b: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    #[cold]
    #[inline(never)]
    fn error_at(&self, offset: usize, what: &'static str) -> ParseError {
        let before = &self.b[..offset.min(self.b.len())];
        let line_start = before
            .iter()
            .rposition(|&c| c == b'\n')
            .map_or(0, |i| i + 1);
        ParseError {
            what,
            offset,
            line: 1 + before.iter().filter(|&&c| c == b'\n').count(),
            column: offset - line_start + 1,
        }
    }

    #[cold]
    #[inline(never)]
    fn error(&self, what: &'static str) -> ParseError {
        self.error_at(self.pos, what)
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    /// Skips whitespace and peeks at the next byte.
    fn peek_token(&mut self) -> Option<u8> {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
        self.peek()
    }

    fn document(&mut self) -> Result<Value, ParseError> {
        let mut stack: Vec<Frame> = Vec::new();
        loop {
            // A value starts here.
            let mut v = match self.peek_token() {
                None => return Err(self.error("unexpected end of input (expected a value)")),
                Some(open @ (b'[' | b'{')) => {
                    if stack.len() >= MAX_DEPTH {
                        return Err(self.error("containers nested deeper than 127"));
                    }
                    self.pos += 1;
                    match (open, self.peek_token()) {
                        (b'[', Some(b']')) => {
                            self.pos += 1;
                            Value::Array(Vec::new())
                        }
                        (b'[', _) => {
                            stack.push(Frame::List(Vec::new()));
                            continue;
                        }
                        (_, Some(b'}')) => {
                            self.pos += 1;
                            Value::Object(Map::new())
                        }
                        _ => {
                            let key = self.key()?;
                            stack.push(Frame::Object(Vec::new(), key));
                            continue;
                        }
                    }
                }
                Some(b'"') => Value::String(self.string()?),
                Some(b't') => self.literal("true", Value::Bool(true))?,
                Some(b'f') => self.literal("false", Value::Bool(false))?,
                Some(b'n') => self.literal("null", Value::Null)?,
                Some(b'-' | b'0'..=b'9') => Value::Number(self.number()?),
                Some(_) => return Err(self.error("expected a value")),
            };
            // The value is complete: add it to its container, closing those that end here.
            loop {
                let Some(mut frame) = stack.pop() else {
                    return match self.peek_token() {
                        None => Ok(v),
                        Some(_) => Err(self.error("trailing characters after the document")),
                    };
                };
                // The closing bracket, and the errors: trailing comma, neither comma nor
                // bracket, end of input.
                let (close, [comma, neither, end]) = match &mut frame {
                    Frame::List(items) => {
                        items.push(v);
                        (
                            b']',
                            [
                                "trailing comma in a list",
                                "expected ',' or ']' in a list",
                                "unexpected end of input in a list",
                            ],
                        )
                    }
                    Frame::Object(m, key) => {
                        m.push((std::mem::take(key), v));
                        (
                            b'}',
                            [
                                "trailing comma in an object",
                                "expected ',' or '}' in an object",
                                "unexpected end of input in an object",
                            ],
                        )
                    }
                };
                match self.peek_token() {
                    Some(b',') => {
                        self.pos += 1;
                        if self.peek_token() == Some(close) {
                            return Err(self.error(comma));
                        }
                        if let Frame::Object(_, key) = &mut frame {
                            *key = self.key()?;
                        }
                        stack.push(frame);
                        break;
                    }
                    Some(c) if c == close => {
                        self.pos += 1;
                        v = match frame {
                            Frame::List(items) => Value::Array(items),
                            Frame::Object(m, _) => Value::Object(Map::from_entries(m)),
                        };
                    }
                    Some(_) => return Err(self.error(neither)),
                    None => return Err(self.error(end)),
                }
            }
        }
    }

    /// An object key and its colon.
    fn key(&mut self) -> Result<String, ParseError> {
        match self.peek_token() {
            Some(b'"') => {}
            Some(_) => return Err(self.error("expected a string key in an object")),
            None => return Err(self.error("unexpected end of input in an object")),
        }
        let k = self.string()?;
        match self.peek_token() {
            Some(b':') => {
                self.pos += 1;
                Ok(k)
            }
            Some(_) => Err(self.error("expected ':' after an object key")),
            None => Err(self.error("unexpected end of input in an object")),
        }
    }

    fn literal(&mut self, word: &str, v: Value) -> Result<Value, ParseError> {
        for &w in word.as_bytes() {
            match self.peek() {
                Some(c) if c == w => self.pos += 1,
                Some(_) => return Err(self.error("invalid literal (expected true, false or null)")),
                None => return Err(self.error("unexpected end of input in a literal")),
            }
        }
        Ok(v)
    }

    /// A string, at its opening quote.
    fn string(&mut self) -> Result<String, ParseError> {
        self.pos += 1;
        let mut out = String::new();
        let mut run = self.pos;
        loop {
            let Some(c) = self.peek() else {
                return Err(self.error("unexpected end of input in a string"));
            };
            match c {
                b'"' | b'\\' => {
                    // `run` and `pos` sit next to ASCII bytes: character boundaries.
                    put_str(&mut out, self.s.get(run..self.pos).unwrap_or_default());
                    self.pos += 1;
                    if c == b'"' {
                        return Ok(out);
                    }
                    self.escape(&mut out)?;
                    run = self.pos;
                }
                0..=0x1f => {
                    return Err(self.error(
                        "control character (U+0000 to U+001F) in a string: it must be escaped",
                    ))
                }
                _ => self.pos += 1,
            }
        }
    }

    /// An escape, after its backslash.
    fn escape(&mut self, out: &mut String) -> Result<(), ParseError> {
        let Some(c) = self.peek() else {
            return Err(self.error("unexpected end of input in a string escape"));
        };
        let ch = match c {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let start = self.pos - 1;
                self.pos += 1;
                let hi = self.hex4()?;
                let code = match hi {
                    0xdc00..=0xdfff => {
                        return Err(self.error_at(start, "unpaired low surrogate in a \\u escape"))
                    }
                    0xd800..=0xdbff => {
                        if self.b.get(self.pos..self.pos + 2) != Some(b"\\u") {
                            return Err(self.error_at(
                                start,
                                "high surrogate \\u escape not followed by a \\u low surrogate",
                            ));
                        }
                        self.pos += 2;
                        let lo = self.hex4()?;
                        if !(0xdc00..=0xdfff).contains(&lo) {
                            return Err(self.error_at(
                                start,
                                "high surrogate \\u escape followed by a \\u escape that is not a \
                                 low surrogate",
                            ));
                        }
                        0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00)
                    }
                    _ => hi,
                };
                match char::from_u32(code) {
                    Some(ch) => out.push(ch),
                    None => return Err(self.error_at(start, "invalid \\u escape")),
                }
                return Ok(());
            }
            _ => return Err(self.error_at(
                self.pos - 1,
                "invalid escape in a string (expected \\\" \\\\ \\/ \\b \\f \\n \\r \\t or \\u)",
            )),
        };
        self.pos += 1;
        out.push(ch);
        Ok(())
    }

    /// Four hex digits of a `\u` escape.
    fn hex4(&mut self) -> Result<u32, ParseError> {
        let mut n = 0;
        for _ in 0..4 {
            let d = match self.peek() {
                None => return Err(self.error("unexpected end of input in a \\u escape")),
                Some(c @ b'0'..=b'9') => c - b'0',
                Some(c @ b'a'..=b'f') => c - b'a' + 10,
                Some(c @ b'A'..=b'F') => c - b'A' + 10,
                Some(_) => return Err(self.error("invalid \\u escape (expected four hex digits)")),
            };
            n = n * 16 + u32::from(d);
            self.pos += 1;
        }
        Ok(n)
    }

    fn digits_error(&self, what: &'static str) -> ParseError {
        match self.peek() {
            None => self.error("unexpected end of input in a number"),
            Some(_) => self.error(what),
        }
    }

    /// A number, read as serde_json reads one (see the module docs).
    fn number(&mut self) -> Result<Number, ParseError> {
        let start = self.pos;
        let neg = self.peek() == Some(b'-');
        if neg {
            self.pos += 1;
        }
        let mut sig: u64 = 0;
        // The decimal exponent that scales `sig`.
        let mut exp: i32 = 0;
        // Whether the result is a float: an integer past u64, a fraction or an exponent.
        let mut float = false;
        match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if let Some(b'0'..=b'9') = self.peek() {
                    return Err(self.error("invalid number: a leading zero"));
                }
            }
            Some(b'1'..=b'9') => {
                while let Some(c @ b'0'..=b'9') = self.peek() {
                    self.pos += 1;
                    if float {
                        // Digits past the u64 range only scale.
                        exp = exp.saturating_add(1);
                    } else if let Some(s) = sig
                        .checked_mul(10)
                        .and_then(|s| s.checked_add(u64::from(c - b'0')))
                    {
                        sig = s;
                    } else {
                        float = true;
                        exp = 1;
                    }
                }
            }
            _ => return Err(self.digits_error("invalid number: expected a digit after '-'")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            let frac_start = self.pos;
            let mut full = false;
            while let Some(c @ b'0'..=b'9') = self.peek() {
                self.pos += 1;
                if full {
                    continue;
                }
                // Fraction digits past the u64 range are dropped.
                match sig
                    .checked_mul(10)
                    .and_then(|s| s.checked_add(u64::from(c - b'0')))
                {
                    Some(s) => {
                        sig = s;
                        exp = exp.saturating_sub(1);
                    }
                    None => full = true,
                }
            }
            if self.pos == frac_start {
                return Err(self.digits_error("invalid number: expected a digit after '.'"));
            }
            float = true;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            let positive = match self.peek() {
                Some(b'+') => {
                    self.pos += 1;
                    true
                }
                Some(b'-') => {
                    self.pos += 1;
                    false
                }
                _ => true,
            };
            let mut e: i32 = match self.peek() {
                Some(c @ b'0'..=b'9') => i32::from(c - b'0'),
                _ => {
                    return Err(
                        self.digits_error("invalid number: expected a digit in the exponent")
                    )
                }
            };
            self.pos += 1;
            while let Some(c @ b'0'..=b'9') = self.peek() {
                self.pos += 1;
                match e
                    .checked_mul(10)
                    .and_then(|x| x.checked_add(i32::from(c - b'0')))
                {
                    Some(x) => e = x,
                    None => {
                        // An exponent past i32: out of range, or zero.
                        if sig != 0 && positive {
                            return Err(self.error_at(start, "number out of range"));
                        }
                        while let Some(b'0'..=b'9') = self.peek() {
                            self.pos += 1;
                        }
                        return Ok(Number::F64(if neg { -0.0 } else { 0.0 }));
                    }
                }
            }
            exp = if positive {
                exp.saturating_add(e)
            } else {
                exp.saturating_sub(e)
            };
            float = true;
        }
        if !float {
            if !neg {
                return Ok(Number::U64(sig));
            }
            let n = (sig as i64).wrapping_neg();
            // -0 and integers below i64::MIN are floats.
            return Ok(if n >= 0 {
                Number::F64(-(sig as f64))
            } else {
                Number::I64(n)
            });
        }
        let mut f = sig as f64;
        loop {
            let a = exp.unsigned_abs() as usize;
            if let Some(&p) = pow10().get(a) {
                if exp >= 0 {
                    f *= p;
                    if f.is_infinite() {
                        return Err(self.error_at(start, "number out of range"));
                    }
                } else {
                    f /= p;
                }
                break;
            }
            if f == 0.0 {
                break;
            }
            if exp >= 0 {
                return Err(self.error_at(start, "number out of range"));
            }
            f /= 1e308;
            exp += 308;
        }
        Ok(Number::F64(if neg { -f } else { f }))
    }
}

/// 10^0 to 10^308, each the float nearest to it (what the literal `1eN` is), computed once
/// from exact powers of five.
fn pow10() -> &'static [f64; 309] {
    // On the heap: a static array would be 2.5 KB of the library's file.
    static TABLE: OnceLock<Box<[f64; 309]>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = Box::new([0.0; 309]);
        // 5^n, little-endian 32-bit limbs (5^308 has 716 bits).
        let mut five = [0u32; 23];
        five[0] = 1;
        let mut len = 1;
        for (n, slot) in t.iter_mut().enumerate() {
            if n > 0 {
                let mut carry = 0u64;
                for l in &mut five[..len] {
                    let x = u64::from(*l) * 5 + carry;
                    *l = x as u32;
                    carry = x >> 32;
                }
                if carry != 0 && len < five.len() {
                    five[len] = carry as u32;
                    len += 1;
                }
            }
            let limbs = &five[..len];
            // The top 128 bits of 5^n, left-aligned, and whether any bit below them is set.
            let bitlen = len as u32 * 32 - limbs[len - 1].leading_zeros();
            let top = limbs.len().min(4);
            let mut acc: u128 = 0;
            for &l in limbs[len - top..].iter().rev() {
                acc = acc << 32 | u128::from(l);
            }
            let acc_bits = bitlen - (len - top) as u32 * 32;
            let aligned = acc << (128 - acc_bits);
            let sticky = limbs[..len - top].iter().any(|&l| l != 0);
            // Round to 53 bits, to nearest, ties to even.
            let mut mant = (aligned >> 75) as u64;
            let rest = aligned & ((1u128 << 75) - 1);
            let half = 1u128 << 74;
            if rest > half || (rest == half && (sticky || mant & 1 == 1)) {
                mant += 1;
            }
            let mut e = bitlen as i64 - 1 + n as i64;
            if mant == 1 << 53 {
                mant >>= 1;
                e += 1;
            }
            // 10^n = 5^n × 2^n: the exponent only.
            *slot = f64::from_bits(((e + 1023) as u64) << 52 | (mant & ((1 << 52) - 1)));
        }
        t
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// serde_json's text for a document, or `None` where it refuses it.
    fn serde(text: &str) -> Option<String> {
        serde_json::from_str::<serde_json::Value>(text)
            .ok()
            .map(|v| v.to_string())
    }

    fn ours(text: &str) -> Option<String> {
        parse(text).ok().map(|v| v.to_string())
    }

    /// Both accept `text` and write it back identically, or both refuse it.
    #[track_caller]
    fn same(text: &str) {
        assert_eq!(ours(text), serde(text), "{text:?}: {:?}", parse(text));
    }

    /// A small xorshift generator, so that the sweeps are the same on every run.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn documents_match_serde_json() {
        for text in [
            "null",
            " true ",
            "false",
            "0",
            "-0",
            "-0.0",
            "1",
            "-1",
            "[]",
            "{}",
            "[[], {}, [{}]]",
            r#"{"b": 1, "a": [1, 2.5, "x"], "c": {"z": null, "y": true}}"#,
            r#"{"a": 1, "a": 2}"#,
            r#"{"": ""}"#,
            r#""\"\\\/\b\f\n\r\t\u0001\u001f\u007f\u00e9\u2028\ud83d\ude00""#,
            "\"raw é ☃ 😀 \u{7f}\"",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775808",
            "-9223372036854775809",
            "123456789012345678901234567890",
            "0.1",
            "1e-7",
            "1E5",
            "1.0e+2",
            "1e400",
            "-1e400",
            "1e-400",
            "0e999999999999",
            "1e999999999999",
            "1e-999999999999",
            "-1e-999999999999",
            "2.2250738585072014e-308",
            "4.9e-324",
            "1.7976931348623157e308",
            "1.7976931348623159e308",
            "12345.67890123456789012345",
            "0.000000000000000000000000000001",
            "3.00000000000000000",
            "99999999999999999999.99999999999999999999e-10",
            " \t\n\r[1 , 2 ]\n",
            // Refused by both.
            "",
            " ",
            "[",
            "]",
            "[1,]",
            "{\"a\":1,}",
            "[1 2]",
            "{\"a\" 1}",
            "{1: 2}",
            "01",
            "-",
            "-a",
            "1.",
            "1.e5",
            ".5",
            "1e",
            "1e+",
            "+1",
            "nul",
            "nulll",
            "tru",
            "True",
            "NaN",
            "Infinity",
            "1 2",
            "\"abc",
            "\"\\x\"",
            "\"\\u12\"",
            "\"\\u12G4\"",
            "\"\\ud800\"",
            "\"\\ud800x\"",
            "\"\\ud800\\n\"",
            "\"\\ud800\\u0041\"",
            "\"\\udc00\"",
            "\"a\u{1}b\"",
            "\"tab\there\"",
            "[1]x",
            "{\"a\":1}}",
        ] {
            same(text);
        }
    }

    #[test]
    fn written_like_serde_json() {
        let v = object(vec![
            ("z", Value::from(1.5)),
            ("a", Value::from(-3i64)),
            (
                "m",
                Value::from(vec![Value::Null, true.into(), "q\"\n\u{1}".into()]),
            ),
            ("n", Value::from(f64::NAN)),
            ("i", Value::from(f64::INFINITY)),
            ("u", Value::from(u64::MAX)),
            ("neg0", Value::from(-0.0)),
        ]);
        let s = serde_json::json!({
            "z": 1.5, "a": -3, "m": [null, true, "q\"\n\u{1}"], "n": f64::NAN,
            "i": f64::INFINITY, "u": u64::MAX, "neg0": -0.0,
        });
        assert_eq!(v.to_string(), s.to_string());
        assert_eq!(Value::from(7i64), Value::Number(Number::U64(7)));
    }

    #[test]
    fn floats_written_like_serde_json() {
        let check = |f: f64| {
            assert_eq!(
                Value::from(f).to_string(),
                serde_json::Value::from(f).to_string(),
                "{f:e} ({:#x})",
                f.to_bits()
            );
        };
        for f in [
            0.0,
            -0.0,
            1.0,
            0.1,
            1e-7,
            1e-5,
            1e-6,
            1e-4,
            1e15,
            1e16,
            123456.789,
            f64::MAX,
            f64::MIN_POSITIVE,
            5e-324,
            0.3333333333333333,
            // Exact ties between two shortest forms (serde_json takes the even one) and the
            // power of two where the even one would not read back.
            2.9802322387695312e-8,
            5.960464477539063e-8,
            1658206780088562.2,
        ] {
            check(f);
            check(-f);
        }
        for i in 0..2048u64 {
            check(f64::from_bits(i << 52));
            check(f64::from_bits(i << 52 | 1));
            check(f64::from_bits(i << 52 | ((1 << 52) - 1)));
        }
        let mut r = Rng(0x9e37_79b9_7f4a_7c15);
        // Fewer in slow builds (`packed_func::test_scale`).
        let n = 200_000 / crate::packed_func::test_scale();
        for _ in 0..n {
            let x = r.next();
            check(f64::from_bits(x));
            check(f64::from_bits(x & 0x800f_ffff_ffff_ffff));
            check(f64::from_bits(x & 0xfff0_0000_0000_0000));
            check((x >> 11) as f64 / (1u64 << 53) as f64 * 1e6);
            check((x % 1_000_000) as f64 / 1000.0);
        }
    }

    #[test]
    fn numbers_read_like_serde_json() {
        let mut r = Rng(0x1234_5678_9abc_def1);
        let mut text = String::new();
        for _ in 0..200_000 / crate::packed_func::test_scale() {
            text.clear();
            let x = r.next();
            if x & 1 == 1 {
                text.push('-');
            }
            let digits = 1 + (x >> 1) % 26;
            for i in 0..digits {
                let d = (r.next() % 10) as u8;
                text.push((b'0' + if i == 0 && digits > 1 { d.max(1) } else { d }) as char);
            }
            if x >> 8 & 1 == 1 {
                text.push('.');
                for _ in 0..1 + (x >> 9) % 25 {
                    text.push((b'0' + (r.next() % 10) as u8) as char);
                }
            }
            if x >> 16 & 1 == 1 {
                text.push(['e', 'E'][(x >> 17 & 1) as usize]);
                match x >> 18 & 3 {
                    0 => text.push('-'),
                    1 => text.push('+'),
                    _ => {}
                }
                let _ = write!(text, "{}", (x >> 20) % 340);
            }
            same(&text);
        }
        // Floats as the runtime writes them read back to what serde_json read.
        for _ in 0..100_000 / crate::packed_func::test_scale() {
            let f = (r.next() >> 11) as f64 / (1u64 << 53) as f64 * 1e6;
            same(&Value::from(f).to_string());
            same(&format!("{f:.17}"));
        }
    }

    /// Objects with keys out of order and repeated read as serde_json reads them (sorted, the
    /// last of a repeated key kept), and the map's edits behave as a B-tree map's.
    #[test]
    fn maps_match_btree_maps() {
        let mut r = Rng(0x5eed_0fa1_10b1_ec70);
        for _ in 0..2_000 {
            let n = r.next() % 12;
            let mut text = String::from("{");
            for i in 0..n {
                if i > 0 {
                    text.push(',');
                }
                let _ = write!(text, "\"k{}\": {}", r.next() % 6, r.next() % 100);
            }
            text.push('}');
            same(&text);
        }
        let mut ours = Map::new();
        let mut theirs = std::collections::BTreeMap::new();
        for _ in 0..20_000 {
            let k = format!("k{}", r.next() % 40);
            let v = Value::from(r.next() % 1000);
            match r.next() % 4 {
                0 | 1 => assert_eq!(ours.insert(k.clone(), v.clone()), theirs.insert(k, v)),
                2 => assert_eq!(ours.remove(&k), theirs.remove(&k)),
                _ => {
                    assert_eq!(ours.get(&k), theirs.get(&k));
                    assert_eq!(ours.contains_key(&k), theirs.contains_key(&k));
                }
            }
            assert_eq!(ours.len(), theirs.len());
        }
        assert!(ours.iter().eq(theirs.iter()));
        assert_eq!(format!("{ours:?}"), format!("{theirs:?}"));
        let collected: Map = theirs.clone().into_iter().rev().collect();
        assert_eq!(collected, ours);
        assert!(ours.into_iter().eq(theirs));
    }

    /// Random edits of a document: both accept the same ones, and write them the same.
    #[test]
    fn mutations_match_serde_json() {
        let base = r#"{"nodes": [{"op": "tvm_op", "name": "f\u00e9", "attrs": {"n": "1"},
            "inputs": [[0, 0, 0]]}], "x": [-1.5e-3, 0, 1E2, true, false, null, "a\"\\b"],
            "y": {"": {}, "z": []}}"#;
        let alphabet = b"{}[]\",:.-+0123456789eEtrufalsn \\\nu\x01";
        let mut r = Rng(0x0bad_5eed_dead_beef);
        let mut seen = [0u32; 2];
        let n = 100_000 / crate::packed_func::test_scale();
        for _ in 0..n {
            let mut b = base.as_bytes().to_vec();
            for _ in 0..1 + r.next() % 3 {
                let at = (r.next() % b.len() as u64) as usize;
                let c = alphabet[(r.next() % alphabet.len() as u64) as usize];
                match r.next() % 3 {
                    0 => b[at] = c,
                    1 => b.insert(at, c),
                    _ => {
                        b.remove(at);
                    }
                }
            }
            if let Ok(text) = std::str::from_utf8(&b) {
                same(text);
                seen[usize::from(parse(text).is_ok())] += 1;
            }
        }
        // Both kinds came up often (each a tenth of the cases at least): the sweep compares
        // acceptance as well as output.
        assert!(seen[0] > n / 10 && seen[1] > n / 10, "{seen:?}");
    }

    #[test]
    fn powers_of_ten_are_the_literals() {
        for (n, &p) in pow10().iter().enumerate() {
            assert_eq!(p, format!("1e{n}").parse::<f64>().unwrap(), "1e{n}");
        }
    }

    #[test]
    fn number_edges() {
        let n = |t: &str| parse(t).unwrap();
        assert_eq!(n("18446744073709551615").as_u64(), Some(u64::MAX));
        assert_eq!(n("18446744073709551615").as_i64(), None);
        assert_eq!(
            n("18446744073709551616"),
            Value::Number(Number::F64(18446744073709551616.0))
        );
        assert_eq!(n("-9223372036854775808").as_i64(), Some(i64::MIN));
        assert_eq!(n("-9223372036854775808").as_u64(), None);
        assert!(
            matches!(n("-0"), Value::Number(Number::F64(z)) if z == 0.0 && z.is_sign_negative())
        );
        assert_eq!(n("-0").to_string(), "-0.0");
        assert_eq!(n("12").as_f64(), Some(12.0));
        assert_eq!(n("1.5").as_u64(), None);
        let e = parse("[1e400]").unwrap_err();
        assert_eq!(e.what, "number out of range");
        assert_eq!(e.offset, 1);
        assert_eq!(n("1e-400").as_f64(), Some(0.0));
    }

    #[test]
    fn depth_is_bounded() {
        for open in ["[", "{\"k\":"] {
            for depth in [MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 100_000] {
                let close = if open == "[" { "]" } else { "}" };
                let text = open.repeat(depth) + "0" + &close.repeat(depth);
                same(&text);
                let r = parse(&text);
                assert_eq!(r.is_ok(), depth <= MAX_DEPTH, "{open} × {depth}");
                if let Err(e) = r {
                    assert!(e.what.contains("nested deeper than 127"), "{e}");
                    assert_eq!(e.offset, MAX_DEPTH * open.len(), "{e}");
                }
            }
        }
        // Unclosed, and closed with the wrong brackets.
        assert!(parse(&"[".repeat(100_000)).is_err());
        assert!(parse(&"[{".repeat(50_000)).is_err());
        assert!(parse(&("[".repeat(100) + &"}".repeat(100))).is_err());
    }

    #[test]
    fn every_truncation_is_an_error() {
        let text = r#"{"nodes": [{"op": "null", "name": "x\u00e9\ud83d\ude00", "inputs": []}],
            "f": [-1.5e-3, 0, true, false, null], "s": "a\"b"}"#;
        assert!(parse(text).is_ok());
        for cut in 0..text.len() {
            let Some(prefix) = text.get(..cut) else {
                continue;
            };
            let e = parse(prefix).unwrap_err();
            assert!(e.offset <= cut, "{cut}: {e}");
        }
        // Cut inside a multi-byte character: bytes, not text.
        let bytes = "\"é\"".as_bytes();
        let e = parse_bytes(&bytes[..2]).unwrap_err();
        assert_eq!((e.what, e.offset), ("invalid UTF-8", 1));
        assert_eq!(parse_bytes(bytes).unwrap(), Value::from("é"));
    }

    #[test]
    fn errors_say_what_and_where() {
        let e = |t: &str| parse(t).unwrap_err().to_string();
        assert_eq!(
            e("{\"a\": [1,\n  2,\n  @]}"),
            "expected a value at line 3 column 3 (byte 17)"
        );
        assert_eq!(
            e("\"a\\qb\""),
            "invalid escape in a string (expected \\\" \\\\ \\/ \\b \\f \\n \\r \\t or \\u) \
             at line 1 column 3 (byte 2)"
        );
        assert!(e("\"\\ud800\"").contains("high surrogate \\u escape not followed"));
        assert!(e("\"\\udc00\"").contains("unpaired low surrogate"));
        assert!(e("\"\\u00zz\"").contains("four hex digits"));
        assert!(e("\"a\u{1}\"").contains("control character (U+0000 to U+001F)"));
        assert!(e("[1,]").contains("trailing comma in a list"));
        assert!(e("[1 2]").contains("expected ',' or ']' in a list"));
        assert!(e("{\"a\":1 \"b\"}").contains("expected ',' or '}' in an object"));
        assert!(e("{\"a\" 1}").contains("expected ':'"));
        assert!(e("{1:2}").contains("expected a string key"));
        assert!(e("[1, 2").contains("unexpected end of input in a list"));
        assert!(e("").contains("unexpected end of input"));
        assert!(e("01").contains("leading zero"));
        assert!(e("1.").contains("unexpected end of input in a number"));
        assert!(e("1.x").contains("expected a digit after '.'"));
        assert!(e("1ex").contains("expected a digit in the exponent"));
        assert!(e("-").contains("unexpected end of input in a number"));
        assert!(e("nulx").contains("invalid literal (expected true, false or null)"));
        assert!(e("{} x").contains("trailing characters"));
    }

    #[test]
    fn round_trips() {
        let v = object(vec![
            (
                "list",
                Value::from(vec![1u64.into(), (-2i64).into(), 0.25.into()]),
            ),
            ("text", "tab\t quote\" backslash\\ é \u{0} \u{1f}".into()),
            (
                "nested",
                object(vec![("deep", object(vec![("x", Value::Null)]))]),
            ),
            ("big", Value::from(u64::MAX)),
            ("min", Value::from(i64::MIN)),
            ("tiny", Value::from(5e-324)),
        ]);
        let text = v.to_string();
        assert_eq!(parse(&text).unwrap(), v);
        assert_eq!(parse(&text).unwrap().to_string(), text);
        assert_eq!(v["list"][2].as_f64(), Some(0.25));
        assert_eq!(v["list"][9], Value::Null);
        assert_eq!(v["missing"]["also"], Value::Null);
        assert_eq!(v["nested"]["deep"].get("x"), Some(&Value::Null));
    }
}
