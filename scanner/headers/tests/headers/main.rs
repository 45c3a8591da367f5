//! The header scanner's tests, one binary: the vendor header corpus (every Ascend and CUDA release),
//! header drift, generic C declarations, and robustness on malformed input.

mod common;
mod corpus;
mod drift;
mod generic;
mod robust;
