//! Xirang adapter runtime.
