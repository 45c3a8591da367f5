//! The C++ interface scanner's tests, one binary: every release of PyTorch's C++ extension headers
//! in the corpus, the upstream changes pinned per release pair, the C++ adapter index (the bridge's
//! shim and op-plugin), and robustness on malformed input.

mod common;
mod corpus;
mod drift;
mod index;
mod robust;
