//! The container functions (`runtime.String`, `runtime.Array*`, `runtime.Map*`,
//! `runtime.ShapeTuple*`, ...) and the object-table helpers, registered by this room.

use crate::object::containers::{ArrayObj, MapObj, ShapeTupleObj, StringObj};
use crate::object::{self, ObjectRef};
use crate::packed_func::error::{Error, Result};
use crate::packed_func::registry::Registrar;
use crate::packed_func::value::{ArgValue, Args, RetValue};

/// An argument as an object; strings become String objects, NULL becomes `None`.
fn arg_to_object(args: &Args<'_>, i: usize) -> Result<Option<ObjectRef>> {
    Ok(match args.get(i)? {
        ArgValue::Null => None,
        ArgValue::Object(o) => Some(o.to_ref()),
        ArgValue::Str(s) => Some(StringObj::from_bytes(s.to_bytes())),
        v => {
            return Err(Error::type_error_fmt(format_args!(
                "argument {i}: expected an object but got {}",
                v.kind_name()
            )))
        }
    })
}

/// The container queries that share one body ([`query`]).
#[derive(Clone, Copy)]
enum Query {
    ArraySize,
    ArrayGetItem,
    MapSize,
    MapGetItem,
    MapCount,
    MapItems,
    ShapeTupleSize,
    ShapeTupleElem,
}

/// The body of the container queries (`runtime.ArraySize`, `runtime.MapGetItem`, ...): one
/// copy of the argument checks and conversions for all of them.
#[inline(never)]
fn query(a: Args<'_>, rv: &mut RetValue, q: Query) -> Result<()> {
    let (n, name) = match q {
        Query::ArraySize => (1, "runtime.ArraySize"),
        Query::ArrayGetItem => (2, "runtime.ArrayGetItem"),
        Query::MapSize => (1, "runtime.MapSize"),
        Query::MapGetItem => (2, "runtime.MapGetItem"),
        Query::MapCount => (2, "runtime.MapCount"),
        Query::MapItems => (1, "runtime.MapItems"),
        Query::ShapeTupleSize => (1, "runtime.GetShapeTupleSize"),
        Query::ShapeTupleElem => (2, "runtime.GetShapeTupleElem"),
    };
    a.expect_len(n, name)?;
    *rv = match q {
        Query::ArraySize => RetValue::Int(a.downcast::<ArrayObj>(0)?.items.len() as i64),
        Query::ArrayGetItem => {
            let arr = a.downcast::<ArrayObj>(0)?;
            let i = a.index(1, arr.items.len(), name)?;
            match arr.items.get(i) {
                Some(Some(o)) => RetValue::Object(o.clone()),
                _ => RetValue::Null,
            }
        }
        Query::MapSize => RetValue::Int(a.downcast::<MapObj>(0)?.len() as i64),
        Query::MapGetItem | Query::MapCount => {
            let m = a.downcast::<MapObj>(0)?;
            let k = match arg_to_object(&a, 1)? {
                Some(k) => k,
                None if matches!(q, Query::MapCount) => {
                    return Err(Error::value("runtime.MapCount: NULL key"))
                }
                None => return Err(Error::value("runtime.MapGetItem: NULL key")),
            };
            match (q, m.get(&k)) {
                (Query::MapCount, found) => RetValue::Int(found.is_some() as i64),
                (_, Some(Some(v))) => RetValue::Object(v.clone()),
                (_, Some(None)) => RetValue::Null,
                (_, None) => {
                    return Err(Error::internal("runtime.MapGetItem: key is not in the map"))
                }
            }
        }
        Query::MapItems => {
            let m = a.downcast::<MapObj>(0)?;
            let mut items = Vec::with_capacity(m.len() * 2);
            for (k, v) in m.iter() {
                items.push(Some(k.clone()));
                items.push(v.clone());
            }
            ArrayObj::new_ref(items).into()
        }
        Query::ShapeTupleSize => RetValue::Int(a.downcast::<ShapeTupleObj>(0)?.dims().len() as i64),
        Query::ShapeTupleElem => {
            let s = a.downcast::<ShapeTupleObj>(0)?.dims();
            let i = a.index(1, s.len(), name)?;
            RetValue::Int(s.get(i).copied().unwrap_or_default())
        }
    };
    Ok(())
}

/// Registers the container functions.
pub(crate) fn register(r: &mut Registrar) {
    r.add("runtime.BuiltFeatures", |a, rv| {
        a.expect_len(0, "runtime.BuiltFeatures")?;
        let names = crate::packed_func::features::built();
        *rv = ArrayObj::new_ref(names.map(|n| Some(StringObj::new_ref(n))).collect()).into();
        Ok(())
    });
    r.add("runtime.String", |a, rv| {
        a.expect_len(1, "runtime.String")?;
        *rv = match a.get(0)? {
            ArgValue::Bytes(bytes) => StringObj::from_bytes(bytes),
            _ => StringObj::new_ref(a.str(0)?),
        }
        .into();
        Ok(())
    });
    r.add("runtime.GetFFIString", |a, rv| {
        a.expect_len(1, "runtime.GetFFIString")?;
        *rv = RetValue::Str(a.str(0)?.to_string());
        Ok(())
    });
    r.add("runtime.Array", |a, rv| {
        let mut items = Vec::with_capacity(a.len());
        for i in 0..a.len() {
            items.push(arg_to_object(&a, i)?);
        }
        *rv = ArrayObj::new_ref(items).into();
        Ok(())
    });
    r.add("runtime.ArraySize", |a, rv| query(a, rv, Query::ArraySize));
    r.add("runtime.ArrayGetItem", |a, rv| {
        query(a, rv, Query::ArrayGetItem)
    });
    r.add("runtime.Map", |a, rv| {
        if a.len() % 2 != 0 {
            return Err(Error::value(
                "runtime.Map expects an even number of arguments (key, value, ...)",
            ));
        }
        let mut m = MapObj::default();
        for i in (0..a.len()).step_by(2) {
            let k =
                arg_to_object(&a, i)?.ok_or_else(|| Error::value("runtime.Map: a key is NULL"))?;
            m.insert(k, arg_to_object(&a, i + 1)?);
        }
        *rv = ObjectRef::new(m).into();
        Ok(())
    });
    r.add("runtime.MapSize", |a, rv| query(a, rv, Query::MapSize));
    r.add("runtime.MapGetItem", |a, rv| {
        query(a, rv, Query::MapGetItem)
    });
    r.add("runtime.MapCount", |a, rv| query(a, rv, Query::MapCount));
    r.add("runtime.MapItems", |a, rv| query(a, rv, Query::MapItems));
    r.add("runtime.ShapeTuple", |a, rv| {
        let mut dims = Vec::with_capacity(a.len());
        for i in 0..a.len() {
            dims.push(a.i64(i)?);
        }
        *rv = ShapeTupleObj::new_ref(&dims).into();
        Ok(())
    });
    r.add("runtime.GetShapeTupleSize", |a, rv| {
        query(a, rv, Query::ShapeTupleSize)
    });
    r.add("runtime.GetShapeTupleElem", |a, rv| {
        query(a, rv, Query::ShapeTupleElem)
    });
    r.add("runtime.ObjectPtrHash", |a, rv| {
        a.expect_len(1, "runtime.ObjectPtrHash")?;
        let o = a
            .object(0)?
            .ok_or_else(|| Error::value("runtime.ObjectPtrHash: NULL object"))?;
        *rv = RetValue::Int(o.as_ptr() as usize as i64);
        Ok(())
    });
    r.add("runtime.DumpTypeTable", |a, _rv| {
        let min = if a.is_empty() { 0 } else { a.i64(0)? };
        eprint!("{}", object::type_table::dump(min));
        Ok(())
    });
}
