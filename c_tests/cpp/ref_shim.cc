// Reference builds only: the hhb-tvm wheel's libtvm_runtime.so does not export
// tvm::runtime::Backtrace(), which TVM's logging.h calls (the symbol lives in libtvm.so).
// An empty backtrace lets programs using TVM's own headers link against the runtime alone.
#include <string>

namespace tvm {
namespace runtime {
std::string Backtrace() { return ""; }
}  // namespace runtime
}  // namespace tvm
