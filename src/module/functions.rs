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

/// Registers the module functions.
pub(crate) fn register(r: &mut Registrar) {
    r.add("runtime.SystemLib", |a, rv| {
        let prefix = if a.is_empty() { "" } else { a.str(0)? };
        *rv = system_lib::system_lib(prefix)?.into_object().into();
        Ok(())
    });
    r.add("runtime.ModuleGetTypeKey", |a, rv| {
        *rv = RetValue::Str(module_arg(&a, 0)?.type_key().to_string());
        Ok(())
    });
    r.add("runtime.ModuleGetImport", |a, rv| {
        let m = module_arg(&a, 0)?;
        let imports = m.imports();
        let i = a.index(1, imports.len(), "runtime.ModuleGetImport")?;
        *rv = imports[i].clone().into_object().into();
        Ok(())
    });
    r.add("runtime.ModuleImportsSize", |a, rv| {
        *rv = RetValue::Int(module_arg(&a, 0)?.imports().len() as i64);
        Ok(())
    });
    r.add("runtime.ModuleClearImports", |a, _rv| {
        module_arg(&a, 0)?.clear_imports();
        Ok(())
    });
    r.add("runtime.ModuleGetFunction", |a, rv| {
        let m = module_arg(&a, 0)?;
        let name = a.str(1)?;
        let q = if a.len() > 2 { a.i64(2)? != 0 } else { false };
        *rv = match m.get_function(name, q)? {
            Some(f) => f.into_object().into(),
            None => RetValue::Null,
        };
        Ok(())
    });
    r.add("runtime.ModuleImplementsFunction", |a, rv| {
        let m = module_arg(&a, 0)?;
        let name = a.str(1)?;
        let q = if a.len() > 2 { a.i64(2)? != 0 } else { false };
        let mut found = m.node().implements_function(name);
        if !found && q {
            found = m.get_function(name, true)?.is_some();
        }
        *rv = RetValue::Int(found as i64);
        Ok(())
    });
    r.add("runtime.ModuleGetPropertyMask", |a, rv| {
        *rv = RetValue::Int(module_arg(&a, 0)?.node().property_mask() as i64);
        Ok(())
    });
    r.add("runtime.ModuleGetFormat", |a, rv| {
        *rv = RetValue::Str(module_arg(&a, 0)?.node().get_format()?);
        Ok(())
    });
    r.add("runtime.ModuleGetSource", |a, rv| {
        let m = module_arg(&a, 0)?;
        let fmt = if a.len() > 1 { a.str(1)? } else { "" };
        *rv = RetValue::Str(m.node().get_source(fmt)?);
        Ok(())
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
