//! toolgate's runtime: the one place that assembles a working toolgate (store, registry with its
//! run kinds, the production call pipeline) and the use cases every front-end offers. It knows
//! no transport: the CLI and the server parse, authenticate and present; the runtime does.
