//! The tracker client: registers a server with TVM's tracker.
