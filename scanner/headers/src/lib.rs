//! Vendor driver header scanner. See the crate README / ARCHITECTURE.md.
