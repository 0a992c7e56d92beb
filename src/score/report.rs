//! What a scan reports: findings, the two risks, and the reference server's score and verdict.
//!
//! - **Leak risk**: is a real-looking credential present? Driven by credential findings and how
//!   sure they are (a passing checksum is the strongest); personal data and generic assignments
//!   stay low.
//! - **Filter risk**: will a host's content filter react? Token-shaped text counts whether or not
//!   it is a live secret: `Bearer sk-ant-oat01-{REDACTED}` is high filter risk and no leak risk.
//! - **Score and verdict**: the paper's Eq. 1 — per family `w_f · min(1.5, 1 + 0.25 (n_f − 1))`,
//!   plus the size heuristics, clamped to [0, 1] and rounded to 4 decimals; verdict by the
//!   thresholds (.70 / .40 / .10 unless the policy says otherwise). Kept for compatibility.
//!
//! A finding never contains any character of the secret: rule, place, length, and a salted
//! short hash to group identical secrets.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::Serialize;
use serde_json::{Value, json};

use super::rule::Confidence;

/// Leak or filter: whether the finding looks like a live secret, or only like one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A real-looking secret (all checks passed).
    Leak,
    /// Token-shaped text only (redacted, placeholder, failed checksum): filter risk.
    Filter,
}

/// One finding. Offsets are bytes into the scanned content.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub rule: String,
    pub family: String,
    pub kind: Kind,
    pub confidence: Confidence,
    /// Blocked by the default policy (`credential`) or a warning (`sensitive`).
    pub severity: &'static str,
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    pub length: usize,
    pub snippet: String,
    /// Salted, truncated sha256 of the secret: equal for equal secrets within one salt.
    pub hash: String,
    /// A structural check (checksum, decoding, Luhn, mod-97) passed.
    pub validated: bool,
    /// Suggested text to put in place of `replace`.
    pub replacement: String,
    #[serde(skip)]
    pub span: Range<usize>,
    #[serde(skip)]
    pub replace: Range<usize>,
}

/// A risk level with its score in [0, 1].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Risk {
    pub score: f64,
    pub level: Level,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    None,
    Low,
    Medium,
    High,
}

impl Risk {
    pub fn of(score: f32) -> Risk {
        let score = (score as f64 * 100.0).round() / 100.0;
        let level = if score >= 0.7 {
            Level::High
        } else if score >= 0.4 {
            Level::Medium
        } else if score > 0.0 {
            Level::Low
        } else {
            Level::None
        };
        Risk { score, level }
    }
}

/// The reference verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Safe,
    Low,
    Medium,
    High,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Safe => "safe",
            Verdict::Low => "low",
            Verdict::Medium => "medium",
            Verdict::High => "high",
        }
    }
}

/// Verdict thresholds (the reference's `.70 / .40 / .10` by default).
#[derive(Debug, Clone, Copy, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Thresholds {
    pub high: f64,
    pub medium: f64,
    pub low: f64,
}

impl Default for Thresholds {
    fn default() -> Thresholds {
        Thresholds { high: 0.70, medium: 0.40, low: 0.10 }
    }
}

/// The reference's family weights, and rwfs's families.
pub const DEFAULT_WEIGHTS: &[(&str, f64)] = &[
    ("api_key", 0.35),
    ("github_pat", 0.35),
    ("jwt", 0.25),
    ("pem_block", 0.50),
    ("aws_secret", 0.40),
    ("pii", 0.15),
    ("binary_hint", 0.20),
    ("cloud_key", 0.40),
    ("db_credential", 0.40),
    ("generic_secret", 0.10),
];

/// Families whose hits suggest redaction (all but `binary_hint`).
fn redactable(family: &str) -> bool {
    family != "binary_hint"
}

/// A `binary_hint` (the paper's L0 binary content): a long base64 blob or dense non-printable
/// bytes. Counted in Eq. 1 and listed in `detected_patterns`, but not a finding: it says how to
/// write the content (split it, or put it in the scratchpad), not that a secret is there.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hint {
    /// `long_base64_blob` or `non_printable_bytes`.
    pub pattern: &'static str,
    /// 1-based, of the blob or of the first non-printable byte.
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    /// The blob's length, or the number of non-printable bytes.
    pub length: usize,
}

/// A size heuristic of the reference that fired.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeHit {
    pub rule: &'static str,
    pub value: usize,
    pub threshold: usize,
    pub add: f64,
    pub action: &'static str,
}

/// The result of scanning one piece of content.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub bytes: usize,
    pub line_count: usize,
    pub max_line_len: usize,
    pub leak_risk: Risk,
    pub filter_risk: Risk,
    pub score: f64,
    pub verdict: Verdict,
    pub findings: Vec<Finding>,
    /// Rules that reached the cap of findings per scan (more may exist).
    pub truncated: Vec<String>,
    /// Distinct matched strings per family (the `n_f` of Eq. 1): a repeated key counts once.
    pub counts: BTreeMap<String, usize>,
    /// The `binary_hint` family's hits.
    pub hints: Vec<Hint>,
    /// Bytes handed to regex searches (merged windows, structural runs, extra patterns): the
    /// scan's work beyond its single linear passes. At most the content's length per rule.
    #[serde(skip)]
    pub work: u64,
    pub size: Vec<SizeHit>,
}

impl Report {
    /// The reference's `detected_patterns`, with rwfs's extra fields on each finding.
    pub fn detected_patterns(&self) -> Vec<Value> {
        let mut out: Vec<Value> = self
            .findings
            .iter()
            .map(|f| {
                json!({
                    "kind": f.family, "pattern": f.rule, "match": f.snippet, "line": f.line,
                    "column": f.column, "rule": f.rule, "finding": f.kind, "confidence": f.confidence,
                    "hash": f.hash, "length": f.length, "replacement": f.replacement,
                })
            })
            .collect();
        out.extend(self.hints.iter().map(|h| {
            let shown = match h.pattern {
                "long_base64_blob" => format!("[hidden: {} chars]", h.length),
                _ => format!("[{} non-printable bytes]", h.length),
            };
            json!({
                "kind": "binary_hint", "pattern": h.pattern, "match": shown, "line": h.line,
                "column": h.column, "length": h.length,
            })
        }));
        out.extend(self.size.iter().map(|s| {
            json!({"kind": "size", "pattern": s.rule, "match": null, "line": null, "value": s.value, "threshold": s.threshold})
        }));
        out
    }

    /// The reference's `suggested_actions`; a redaction says `reason: filter_risk_high` when a
    /// host's content filter is likely to refuse the content whatever the verdict.
    pub fn suggested_actions(&self) -> Vec<Value> {
        let mut out = Vec::new();
        let targets: Vec<&String> = self.counts.keys().filter(|f| redactable(f) && self.counts[*f] > 0).collect();
        if !targets.is_empty() {
            let mut redact = json!({"action": "redact", "targets": targets});
            // Eq. 1 can say "low" for one vendor token (the paper's incident header scores 0.35);
            // the filter risk is why the agent should still redact.
            if self.filter_risk.level == Level::High {
                redact["reason"] = json!("filter_risk_high");
            }
            out.push(redact);
        }
        if self.counts.get("binary_hint").is_some_and(|&n| n > 0) {
            out.push(json!({"action": "split", "reason": "binary_content_detected"}));
        }
        for s in &self.size {
            out.push(json!({"action": s.action, "reason": format!("{}_{}_exceeds_{}", s.rule, s.value, s.threshold)}));
        }
        out
    }
}

/// The reference's size rules.
pub fn size_hits(bytes: usize, line_count: usize, max_line_len: usize) -> Vec<SizeHit> {
    let rules: [(&'static str, usize, usize, f64, &'static str); 4] = [
        ("big_100kb", bytes, 100_000, 0.15, "split"),
        ("big_500kb", bytes, 500_000, 0.30, "split"),
        ("long_line", max_line_len, 2000, 0.20, "escape"),
        ("many_lines", line_count, 5000, 0.10, "split"),
    ];
    rules
        .iter()
        .filter(|(_, value, threshold, _, _)| value > threshold)
        .map(|&(rule, value, threshold, add, action)| SizeHit { rule, value, threshold, add, action })
        .collect()
}

/// Eq. 1 and the verdict.
pub fn reference_score(
    counts: &BTreeMap<String, usize>,
    weights: &BTreeMap<String, f64>,
    size: &[SizeHit],
    thresholds: &Thresholds,
) -> (f64, Verdict) {
    let mut score = 0.0;
    for (family, &n) in counts {
        if n == 0 {
            continue;
        }
        let w = weights.get(family).copied().unwrap_or(0.0);
        score += w * (1.0 + 0.25 * (n as f64 - 1.0)).min(1.5);
    }
    score += size.iter().map(|s| s.add).sum::<f64>();
    let score = (score.clamp(0.0, 1.0) * 10_000.0).round() / 10_000.0;
    let verdict = if score >= thresholds.high {
        Verdict::High
    } else if score >= thresholds.medium {
        Verdict::Medium
    } else if score >= thresholds.low {
        Verdict::Low
    } else {
        Verdict::Safe
    };
    (score, verdict)
}

/// How likely a finding is a live credential (leak risk contribution).
pub fn leak_score(f: &Finding) -> f32 {
    if f.kind != Kind::Leak {
        return 0.0;
    }
    if f.severity != "credential" {
        return if f.family == "pii" { 0.2 } else { 0.3 };
    }
    match (f.confidence, f.validated) {
        (Confidence::High, true) => 1.0,
        (Confidence::High, false) => 0.95,
        (Confidence::Medium, _) => 0.75,
        (Confidence::Low, _) => 0.5,
    }
}

/// How likely a host's content filter reacts to a finding (filter risk contribution).
pub fn filter_score(f: &Finding, vendor_prefix: bool) -> f32 {
    if vendor_prefix || f.family == "pem_block" {
        0.9
    } else if f.family == "jwt" || (f.severity == "credential" && f.kind == Kind::Leak) {
        0.6
    } else {
        0.2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eq1_matches_the_reference() {
        let weights: BTreeMap<String, f64> = DEFAULT_WEIGHTS.iter().map(|(f, w)| (f.to_string(), *w)).collect();
        let counts =
            |pairs: &[(&str, usize)]| pairs.iter().map(|(f, n)| (f.to_string(), *n)).collect::<BTreeMap<_, _>>();
        let t = Thresholds::default();
        // One api_key family can reach at most 0.525 (medium), as the reference notes.
        assert_eq!(reference_score(&counts(&[("api_key", 9)]), &weights, &[], &t), (0.525, Verdict::Medium));
        assert_eq!(reference_score(&counts(&[("api_key", 2)]), &weights, &[], &t), (0.4375, Verdict::Medium));
        assert_eq!(reference_score(&counts(&[("pii", 1)]), &weights, &[], &t), (0.15, Verdict::Low));
        assert_eq!(
            reference_score(&counts(&[("api_key", 1), ("pem_block", 1)]), &weights, &[], &t),
            (0.85, Verdict::High)
        );
        let size = size_hits(600_000, 6000, 10);
        assert_eq!(size.len(), 3);
        assert_eq!(reference_score(&BTreeMap::new(), &weights, &size, &t).0, 0.55);
    }
}
