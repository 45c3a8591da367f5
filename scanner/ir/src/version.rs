//! Upstream version numbers and their ordering (`v2.1` selects the newest `2.1.x`).

use std::fmt;

use crate::registry::TorchgenVersion;

/// An upstream version: `2.1.0`, `2.1.0.post17`, `12.4.127`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Version {
    pub parts: Vec<u64>,
    /// Anything after the numeric parts (`post17`), compared numerically when it ends in digits.
    pub suffix: Option<(String, u64)>,
}

impl Version {
    /// Parses `v2.1.0`, `2.1`, `2.1.0.post17`.
    pub fn parse(s: &str) -> Option<Version> {
        let s = s.strip_prefix('v').unwrap_or(s);
        if s.is_empty() {
            return None;
        }
        let mut parts = Vec::new();
        let mut suffix = None;
        for piece in s.split('.') {
            if suffix.is_some() {
                return None;
            }
            if let Ok(n) = piece.parse::<u64>() {
                parts.push(n);
            } else {
                let digits_at = piece.find(|c: char| c.is_ascii_digit()).unwrap_or(piece.len());
                let (word, num) = piece.split_at(digits_at);
                if word.is_empty() || !word.bytes().all(|b| b.is_ascii_alphabetic()) {
                    return None;
                }
                let n = if num.is_empty() { 0 } else { num.parse().ok()? };
                suffix = Some((word.to_string(), n));
            }
        }
        if parts.is_empty() || parts.len() > 4 {
            return None;
        }
        Some(Version { parts, suffix })
    }

    /// True when `self` (a full version) is selected by `prefix` (`v2.1` selects `2.1.x`).
    pub fn matches(&self, prefix: &Version) -> bool {
        self.parts.len() >= prefix.parts.len()
            && self.parts[..prefix.parts.len()] == prefix.parts[..]
            && (prefix.suffix.is_none() || prefix.suffix == self.suffix)
    }

    pub fn major_minor(&self) -> (u64, u64) {
        (self.parts.first().copied().unwrap_or(0), self.parts.get(1).copied().unwrap_or(0))
    }

    /// The torchgen behaviour to follow for this PyTorch version.
    pub fn torchgen(&self) -> TorchgenVersion {
        let (ma, mi) = self.major_minor();
        TorchgenVersion::new(ma as u32, mi as u32)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("v")?;
        for (i, p) in self.parts.iter().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            write!(f, "{p}")?;
        }
        if let Some((w, n)) = &self.suffix {
            write!(f, ".{w}{n}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_order_and_match() {
        let a = Version::parse("v2.1.0").unwrap();
        let b = Version::parse("2.1.2").unwrap();
        let c = Version::parse("v2.10.0").unwrap();
        assert!(a < b && b < c);
        assert!(b.matches(&Version::parse("v2.1").unwrap()));
        assert!(!c.matches(&Version::parse("v2.1").unwrap()));
        let p = Version::parse("v2.1.0.post17").unwrap();
        assert_eq!(p.to_string(), "v2.1.0.post17");
        assert!(Version::parse("v2.1.0.post3").unwrap() < Version::parse("v2.1.0.post17").unwrap());
        assert!(Version::parse("banana").is_none());
        assert!(Version::parse("v").is_none());
    }
}
