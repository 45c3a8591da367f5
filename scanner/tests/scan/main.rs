//! The scanner's integration tests, one binary: the `xirang-scan` command line on bad input, the bot's
//! command line, conformance of the derivatives parser, property tests of the schema parser, and the
//! two end-to-end runs that build the runtime (`new-op`, the upgrade rehearsal). Run one module with
//! `cargo test -p xirang-scan --test scan <module>::`.

mod bad_input;
mod bot_cli;
mod cxx_cli;
mod derivatives_conformance;
mod new_op;
mod schema_props;
mod upgrade_rehearsal;
mod vendor_corpus;
