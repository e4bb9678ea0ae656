//! The module object of an executor (type key `GraphExecutor`).

use super::Executor;
use crate::module::Module;
use crate::object::ObjectRef;
use crate::packed_func::error::Result;
use crate::packed_func::function::Function;
use std::sync::Arc;

/// The module node of an executor (type key `GraphExecutor`).
pub(crate) struct ExecutorNode {
    pub(crate) exec: Arc<Executor>,
    pub(crate) debug: bool,
}

impl crate::module::ModuleNode for ExecutorNode {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn type_key(&self) -> &str {
        "GraphExecutor"
    }

    fn get_function(&self, name: &str, _this: Option<&ObjectRef>) -> Result<Option<Function>> {
        Ok(super::super::functions::executor_function(
            &self.exec, self.debug, name,
        ))
    }

    fn property_mask(&self) -> i32 {
        crate::module::property::RUNNABLE
    }
}

/// Wraps an executor in a module object.
pub(crate) fn make_module(exec: Arc<Executor>, debug: bool) -> Module {
    Module::new(Box::new(ExecutorNode { exec, debug }))
}

/// The executor behind a module, when it is one of ours (found by downcasting its node).
pub(crate) fn executor_of(m: &Module) -> Option<Arc<Executor>> {
    m.node()
        .as_any()
        .downcast_ref::<ExecutorNode>()
        .map(|n| n.exec.clone())
}
