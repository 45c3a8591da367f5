//! Header drift: rules as data and the comparison of two header sets.
pub use crate::HeaderSet;
use serde::{Deserialize, Serialize};
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HeaderSeverity {
    Abi,
    Source,
    None,
}
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct HeaderRule {
    pub id: &'static str,
    pub severity: HeaderSeverity,
    pub explanation: &'static str,
    pub remedy: &'static str,
}
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct HeaderChange {
    pub rule: &'static str,
    pub severity: HeaderSeverity,
    pub subject: String,
    pub file: String,
    pub line: u32,
    pub old: Option<String>,
    pub new: Option<String>,
    pub message: String,
}
pub fn rules() -> &'static [HeaderRule] {
    &[]
}
pub fn diff(_old: &HeaderSet, _new: &HeaderSet) -> Vec<HeaderChange> {
    Vec::new()
}
