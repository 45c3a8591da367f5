//! xirang-scan: PyTorch operator registry and vendor driver interfaces -> Interface IR.
