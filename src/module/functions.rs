//! The module functions (`runtime.Module*`, `runtime.SystemLib`, `loadfile_so`), registered
//! by this room.

use crate::module::{self, system_lib, Module, ModuleObj};
use crate::packed_func::confine;
use crate::packed_func::error::Result;
use crate::packed_func::registry::Registrar;
use crate::packed_func::value::{Args, RetValue};

fn module_arg(args: &Args<'_>, i: usize) -> Result<Module> {
    Module::from_object(args.object_ref::<ModuleObj>(i)?)
}

/// What a module function taking its module first does (one body for them all).
#[derive(Clone, Copy)]
enum Op {
    TypeKey,
    Import,
    ImportsSize,
    ClearImports,
    GetFunction,
    Implements,
    PropertyMask,
    Format,
    Source,
}

/// The body of the module functions that take the module as their first argument.
#[inline(never)]
fn module_op(a: Args<'_>, rv: &mut RetValue, op: Op) -> Result<()> {
    let m = module_arg(&a, 0)?;
    match op {
        Op::TypeKey => *rv = RetValue::Str(m.type_key().to_string()),
        Op::Import => {
            let imports = m.imports();
            let i = a.index(1, imports.len(), "runtime.ModuleGetImport")?;
            if let Some(m) = imports.get(i) {
                *rv = m.clone().into_object().into();
            }
        }
        Op::ImportsSize => *rv = RetValue::Int(m.imports().len() as i64),
        Op::ClearImports => m.clear_imports(),
        Op::GetFunction | Op::Implements => {
            let name = a.str(1)?;
            let q = if a.len() > 2 { a.i64(2)? != 0 } else { false };
            if let Op::GetFunction = op {
                *rv = match m.get_function(name, q)? {
                    Some(f) => f.into_object().into(),
                    None => RetValue::Null,
                };
            } else {
                let mut found = m.node().implements_function(name);
                if !found && q {
                    found = m.get_function(name, true)?.is_some();
                }
                *rv = RetValue::Int(found as i64);
            }
        }
        Op::PropertyMask => *rv = RetValue::Int(m.node().property_mask() as i64),
        Op::Format => *rv = RetValue::Str(m.node().get_format()?),
        Op::Source => {
            let fmt = if a.len() > 1 { a.str(1)? } else { "" };
            *rv = RetValue::Str(m.node().get_source(fmt)?);
        }
    }
    Ok(())
}

/// Registers the module functions.
pub(crate) fn register(r: &mut Registrar) {
    r.add("runtime.SystemLib", |a, rv| {
        let prefix = if a.is_empty() { "" } else { a.str(0)? };
        *rv = system_lib::system_lib(prefix)?.into_object().into();
        Ok(())
    });
    r.add("runtime.ModuleGetTypeKey", |a, rv| {
        module_op(a, rv, Op::TypeKey)
    });
    r.add("runtime.ModuleGetImport", |a, rv| {
        module_op(a, rv, Op::Import)
    });
    r.add("runtime.ModuleImportsSize", |a, rv| {
        module_op(a, rv, Op::ImportsSize)
    });
    r.add("runtime.ModuleClearImports", |a, rv| {
        module_op(a, rv, Op::ClearImports)
    });
    r.add("runtime.ModuleGetFunction", |a, rv| {
        module_op(a, rv, Op::GetFunction)
    });
    r.add("runtime.ModuleImplementsFunction", |a, rv| {
        module_op(a, rv, Op::Implements)
    });
    r.add("runtime.ModuleGetPropertyMask", |a, rv| {
        module_op(a, rv, Op::PropertyMask)
    });
    r.add("runtime.ModuleGetFormat", |a, rv| {
        module_op(a, rv, Op::Format)
    });
    r.add("runtime.ModuleGetSource", |a, rv| {
        module_op(a, rv, Op::Source)
    });
    r.add("runtime.ModuleSaveToFile", |a, _rv| {
        a.expect_len(3, "runtime.ModuleSaveToFile")?;
        let file = confine::resolve_str(a.str(1)?, "runtime.ModuleSaveToFile")?;
        module_arg(&a, 0)?.node().save_to_file(&file, a.str(2)?)
    });
    r.add("runtime.ModuleLoadFromFile", |a, rv| {
        let file = confine::resolve_str(a.str(0)?, "runtime.ModuleLoadFromFile")?;
        let fmt = if a.len() > 1 { a.str(1)? } else { "" };
        *rv = module::load_from_file(&file, fmt)?.into_object().into();
        Ok(())
    });
    #[cfg(feature = "dso")]
    r.add("runtime.module.loadfile_so", |a, rv| {
        let file = confine::resolve_str(a.str(0)?, "runtime.module.loadfile_so")?;
        *rv = module::dso::load(&file)?.into_object().into();
        Ok(())
    });
}
