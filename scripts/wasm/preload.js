// Prepended to the emcc glue (--pre-js) by scripts/build_wasm.sh. Makes the glue a library
// provider for tvmjs: instead of fetching and instantiating the wasm itself, the glue hands
// over its import object, and tvmjs, which instantiates the module, gives the instance back
// through `start` (tvmjs's detectLibraryProvider reads `wasmLibraryProvider.{imports,start}`).
var tvmrtProvider = {
  imports: undefined,
  receive: undefined,
  start: function (instance) {
    tvmrtProvider.receive(instance);
  },
};
var Module = {
  wasmLibraryProvider: tvmrtProvider,
  instantiateWasm: function (imports, receiveInstance) {
    tvmrtProvider.imports = imports;
    tvmrtProvider.receive = receiveInstance;
    return {};
  },
};
