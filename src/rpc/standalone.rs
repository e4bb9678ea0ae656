//! The standalone RPC server (what `tvmrt rpc-server` runs).
