//! Data type names: `float32`, `int8x4`, `bool`, `handle`, `bfloat16`, ... both ways.

use super::error::{Error, Result};
use super::types::*;

/// Prints a data type the way TVM does (`float32`, `int8x4`, `bool`, `handle`).
pub fn dtype_to_string(t: DLDataType) -> String {
    if t.code == DL_UINT && t.bits == 1 && t.lanes == 1 {
        return "bool".into();
    }
    if t.bits == 0 {
        return String::new();
    }
    let base = match t.code {
        DL_INT => "int",
        DL_UINT => "uint",
        DL_FLOAT => "float",
        DL_OPAQUE_HANDLE => "handle",
        DL_BFLOAT => "bfloat",
        DL_COMPLEX => "complex",
        DL_BOOL => "bool",
        c => return format!("unknown_type_code_{c}_{}", t.bits),
    };
    let mut s = base.to_string();
    if t.code != DL_OPAQUE_HANDLE {
        s.push_str(&t.bits.to_string());
    }
    if t.lanes > 1 {
        s.push_str(&format!("x{}", t.lanes));
    }
    s
}

/// Whether the type code is one TVM can print.
pub fn known_code(t: DLDataType) -> bool {
    matches!(
        t.code,
        DL_INT | DL_UINT | DL_FLOAT | DL_OPAQUE_HANDLE | DL_BFLOAT | DL_COMPLEX | DL_BOOL
    )
}

/// Parses a data type name (`float32`, `int8x4`, `bool`, `handle`, `float16`, `bfloat16`,
/// `e4m3_float8` is not supported).
pub fn dtype_from_string(s: &str) -> Result<DLDataType> {
    let err = || Error::value(format!("unknown data type '{s}'"));
    match s {
        "bool" => return Ok(DLDataType::new(DL_UINT, 1, 1)),
        "void" => return Ok(DLDataType::new(DL_OPAQUE_HANDLE, 0, 0)),
        "handle" | "handle64" => return Ok(DLDataType::new(DL_OPAQUE_HANDLE, 64, 1)),
        _ => {}
    }
    let (base, lanes) = match s.split_once('x') {
        Some((b, l)) => (b, l.parse::<u16>().map_err(|_| err())?),
        None => (s, 1),
    };
    let (code, rest) = if let Some(r) = base.strip_prefix("uint") {
        (DL_UINT, r)
    } else if let Some(r) = base.strip_prefix("int") {
        (DL_INT, r)
    } else if let Some(r) = base.strip_prefix("float") {
        (DL_FLOAT, r)
    } else if let Some(r) = base.strip_prefix("bfloat") {
        (DL_BFLOAT, r)
    } else if let Some(r) = base.strip_prefix("complex") {
        (DL_COMPLEX, r)
    } else {
        return Err(err());
    };
    let bits = if rest.is_empty() {
        32
    } else {
        rest.parse::<u8>().map_err(|_| err())?
    };
    if bits == 0 || lanes == 0 {
        return Err(err());
    }
    Ok(DLDataType::new(code, bits, lanes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for s in [
            "float32",
            "int8",
            "uint8",
            "int64",
            "float16",
            "bfloat16",
            "int8x4",
            "float32x8",
            "bool",
            "handle",
        ] {
            let t = dtype_from_string(s).unwrap();
            assert_eq!(dtype_to_string(t), s);
        }
        assert_eq!(
            dtype_from_string("float").unwrap(),
            DLDataType::new(DL_FLOAT, 32, 1)
        );
        assert!(dtype_from_string("floaty").is_err());
        assert!(dtype_from_string("int0").is_err());
    }
}
