//! "Did you mean ...?" for names that name nothing: operators, rule ids, tags, keys.

/// Levenshtein distance (bytes; names here are ASCII), bounded work: `O(a.len() * b.len())`.
pub fn distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, &x) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, &y) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(x != y);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// The closest of `candidates` to `name`, when it is close enough to be a likely typo (at most a
/// third of the name's length, and at most 4 edits); ties go to the first candidate in order.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    if name.len() > 256 {
        return None;
    }
    let max = (name.len() / 3).clamp(1, 4);
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        if c.len().abs_diff(name.len()) > max || c.len() > 256 {
            continue;
        }
        let d = distance(&name.to_ascii_lowercase(), &c.to_ascii_lowercase());
        if d <= max && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

/// ` (did you mean `x`?)`, or nothing.
pub fn hint<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    closest(name, candidates).map(|c| format!(" (did you mean `{c}`?)")).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_are_found() {
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(closest("add.Tensr", ["add.Tensor", "add.Scalar", "mul.Tensor"]), Some("add.Tensor"));
        assert_eq!(closest("arg.insrted", ["arg.inserted", "arg.removed"]), Some("arg.inserted"));
        assert_eq!(closest("zzzzzz", ["add.Tensor"]), None);
        assert_eq!(hint("pointwse", ["pointwise", "core"]), " (did you mean `pointwise`?)");
    }
}
