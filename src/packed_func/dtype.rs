//! Data type names: `float32`, `int8x4`, `bool`, `handle`, `bfloat16`, ... both ways.

use super::error::{Error, Result};
use super::text::{owned, parse_dec, push, push_dec};
use super::types::*;

/// TVM v0.20's type code of `float8_e4m3fn` (TVM's own code, not DLPack's).
pub const TVM_FLOAT8_E4M3FN: u8 = 6;
/// TVM v0.20's type code of `float8_e5m2`.
pub const TVM_FLOAT8_E5M2: u8 = 7;
/// TVM v0.20's type code of `float4_e2m1fn`.
pub const TVM_FLOAT4_E2M1FN: u8 = 8;

/// Prints a data type the way TVM v0.20 does (`float32`, `int8x4`, `bool`, `handle`,
/// `float8_e4m3fn`). Codes 6-8 are TVM's low-precision floats, as in v0.20, whose names carry
/// no bit count.
pub fn dtype_to_string(t: DLDataType) -> String {
    if t.code == DL_UINT && t.bits == 1 && t.lanes == 1 {
        return owned("bool");
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
        TVM_FLOAT8_E4M3FN => "float8_e4m3fn",
        TVM_FLOAT8_E5M2 => "float8_e5m2",
        TVM_FLOAT4_E2M1FN => "float4_e2m1fn",
        c => return format!("unknown_type_code_{c}_{}", t.bits),
    };
    let mut s = owned(base);
    if !matches!(
        t.code,
        DL_OPAQUE_HANDLE | TVM_FLOAT8_E4M3FN | TVM_FLOAT8_E5M2 | TVM_FLOAT4_E2M1FN
    ) {
        push_dec(&mut s, u32::from(t.bits));
    }
    if t.lanes > 1 {
        push(&mut s, "x");
        push_dec(&mut s, u32::from(t.lanes));
    }
    s
}

/// Whether the type code is one TVM can print.
pub fn known_code(t: DLDataType) -> bool {
    matches!(
        t.code,
        DL_INT
            | DL_UINT
            | DL_FLOAT
            | DL_OPAQUE_HANDLE
            | DL_BFLOAT
            | DL_COMPLEX
            | TVM_FLOAT8_E4M3FN
            | TVM_FLOAT8_E5M2
            | TVM_FLOAT4_E2M1FN
    )
}

/// Parses a data type name (`float32`, `int8x4`, `bool`, `handle`, `float16`, `bfloat16`,
/// `float8_e4m3fn`, `float8_e5m2`, `float4_e2m1fn`, and TVM 0.16's spellings `e4m3_float8`,
/// `e5m2_float8`).
pub fn dtype_from_string(s: &str) -> Result<DLDataType> {
    let err = || Error::value_fmt(format_args!("unknown data type '{s}'"));
    match s {
        "bool" => return Ok(DLDataType::new(DL_UINT, 1, 1)),
        "void" => return Ok(DLDataType::new(DL_OPAQUE_HANDLE, 0, 0)),
        "handle" | "handle64" => return Ok(DLDataType::new(DL_OPAQUE_HANDLE, 64, 1)),
        _ => {}
    }
    for (name, code, bits) in [
        ("float8_e4m3fn", TVM_FLOAT8_E4M3FN, 8),
        ("e4m3_float8", TVM_FLOAT8_E4M3FN, 8),
        ("float8_e5m2", TVM_FLOAT8_E5M2, 8),
        ("e5m2_float8", TVM_FLOAT8_E5M2, 8),
        ("float4_e2m1fn", TVM_FLOAT4_E2M1FN, 4),
    ] {
        if let Some(rest) = s.strip_prefix(name) {
            let lanes = match rest {
                "" => 1,
                r => r
                    .strip_prefix('x')
                    .and_then(|l| parse_dec(l, u16::MAX.into()))
                    .filter(|&l| l > 0)
                    .ok_or_else(err)?,
            };
            return Ok(DLDataType::new(code, bits, lanes as u16));
        }
    }
    let (base, lanes) = match s.split_once('x') {
        Some((b, l)) => (b, parse_dec(l, u16::MAX.into()).ok_or_else(err)?),
        None => (s, 1),
    };
    let mut found = None;
    for (name, code) in [
        ("uint", DL_UINT),
        ("int", DL_INT),
        ("float", DL_FLOAT),
        ("bfloat", DL_BFLOAT),
        ("complex", DL_COMPLEX),
    ] {
        if let Some(r) = base.strip_prefix(name) {
            found = Some((code, r));
            break;
        }
    }
    let (code, rest) = found.ok_or_else(err)?;
    let bits = if rest.is_empty() {
        32
    } else {
        parse_dec(rest, u8::MAX.into()).ok_or_else(err)?
    };
    if bits == 0 || lanes == 0 {
        return Err(err());
    }
    Ok(DLDataType::new(code, bits as u8, lanes as u16))
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
            "float8_e4m3fn",
            "float8_e5m2x4",
            "float4_e2m1fn",
        ] {
            let t = dtype_from_string(s).unwrap();
            assert_eq!(dtype_to_string(t), s);
        }
        assert_eq!(
            dtype_from_string("float").unwrap(),
            DLDataType::new(DL_FLOAT, 32, 1)
        );
        assert_eq!(
            dtype_from_string("e4m3_float8").unwrap(),
            DLDataType::new(TVM_FLOAT8_E4M3FN, 8, 1)
        );
        assert_eq!(
            dtype_from_string("e5m2_float8x2").unwrap(),
            DLDataType::new(TVM_FLOAT8_E5M2, 8, 2)
        );
        assert!(dtype_from_string("float8_e5m2x").is_err());
        assert!(dtype_from_string("floaty").is_err());
        assert!(dtype_from_string("int0").is_err());
    }
}
