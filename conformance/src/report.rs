//! What the runner prints: the markdown table, the differences in full, the totals line.

use crate::outcome::{Outcome, StepResult, Verdict};
use serde_json::Value as Json;
use std::fmt::Write as _;

/// Longest message shown in a table cell.
const MAX_MESSAGE: usize = 80;

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let cut: String = s.chars().take(max).collect();
        format!("{cut}…")
    }
}

/// A one-line summary of a (normalised) answer: `SUCCESS`, `CONTAINER_NOT_FOUND "ContainerID 5 does
/// not exist"`, `status INTERNAL "…"`, `no answer (…)`, `prom … +1`.
pub fn summarize(answer: &Json) -> String {
    let one_line = |s: &str| truncate(&s.replace(['\n', '\r'], " "), MAX_MESSAGE);
    if let Some(r) = answer.get("response") {
        let result = r
            .get("result")
            .map_or_else(|| "(no result)".to_string(), crate::proto::result_name);
        match r.get("message").and_then(Json::as_str) {
            Some(m) if result != "SUCCESS" => format!("{result} \"{}\"", one_line(m)),
            _ => result,
        }
    } else if let Some(s) = answer.get("status") {
        let code = s.get("code").and_then(Json::as_str).unwrap_or("?");
        match s.get("message").and_then(Json::as_str) {
            Some(m) if !m.is_empty() => format!("status {code} \"{}\"", one_line(m)),
            _ => format!("status {code}"),
        }
    } else if let Some(why) = answer.get("no_answer") {
        format!("no answer ({})", why.as_str().unwrap_or("?"))
    } else if let Some(reply) = answer.get("raft_reply") {
        raft_summary(reply, &one_line)
    } else if let Some(p) = answer.get("prom") {
        crate::prom::summary(p)
    } else if answer.get("undecodable").is_some() {
        "undecodable answer".to_string()
    } else if let Some(e) = answer.get("runner_error") {
        format!("runner error: {}", one_line(e.as_str().unwrap_or("?")))
    } else {
        one_line(&answer.to_string())
    }
}

/// A Raft reply in a line: `raft L$BASE+1: SUCCESS` (its log index, then the command's answer),
/// `raft: StateMachineException "…"`; a commit index short of the stream's last log index is
/// shown (`C$BASE+0`), one that covers it is not.
fn raft_summary(reply: &Json, one_line: &dyn Fn(&str) -> String) -> String {
    let index = |v: Option<&Json>| match v {
        Some(Json::String(s)) => s.clone(),
        Some(Json::Number(n)) if n.as_u64() != Some(0) => n.to_string(),
        _ => String::new(),
    };
    let log = index(reply.get("logIndex"));
    let commit = index(
        reply
            .get("commitInfos")
            .and_then(|c| c.get(0))
            .and_then(|c| c.get("commitIndex")),
    );
    let mut head = "raft".to_string();
    if log == "covers" {
        // A watch's reply: its index has reached the watched one.
        head.push_str(" watched index reached");
    } else if !log.is_empty() {
        head.push_str(&format!(" L{log}"));
    }
    if !commit.is_empty() && commit != "covers" {
        head.push_str(&format!(" C{commit}"));
    }
    if let Some(e) = reply.get("exception") {
        let class = e.get("class").and_then(Json::as_str).unwrap_or("");
        let class = class.rsplit('.').next().unwrap_or(class);
        let kind = e.get("kind").and_then(Json::as_str).unwrap_or("exception");
        let name = if class.is_empty() { kind } else { class };
        return match e.get("message").and_then(Json::as_str) {
            Some(m) if !m.is_empty() => format!("{head}: {name} \"{}\"", one_line(m)),
            _ => format!("{head}: {name}"),
        };
    }
    match reply.get("message") {
        Some(m) => format!("{head}: {}", summarize(m)),
        None => head,
    }
}

/// A side's cell: step summaries joined with `; `, repeats collapsed (`SUCCESS ×10`), steps not
/// compared in parentheses.
pub fn cell(steps: &[StepResult]) -> String {
    let mut parts: Vec<(String, usize)> = Vec::new();
    for s in steps {
        let text = if s.compare {
            summarize(&s.normalized)
        } else {
            format!("({})", summarize(&s.normalized))
        };
        match parts.last_mut() {
            Some((last, n)) if *last == text => *n += 1,
            _ => parts.push((text, 1)),
        }
    }
    let joined: Vec<String> = parts
        .into_iter()
        .map(|(t, n)| if n > 1 { format!("{t} ×{n}") } else { t })
        .collect();
    escape(&joined.join("; "))
}

fn escape(s: &str) -> String {
    s.replace('|', "\\|")
}

fn step_ref(s: &StepResult) -> String {
    if s.repeats > 1 {
        format!("{}#{}", s.step, s.repeat)
    } else {
        s.step.to_string()
    }
}

/// The differing steps, a step whose every repetition differs once: `1 (×20), 4`.
fn differing_steps(o: &Outcome) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < o.differing.len() {
        let first = &o.real[o.differing[i]];
        let same_step = o.differing[i..]
            .iter()
            .take_while(|&&j| o.real[j].step == first.step)
            .count();
        if first.repeats > 1 && same_step == first.repeats as usize {
            parts.push(format!("{} (×{})", first.step, first.repeats));
        } else {
            parts.extend(
                o.differing[i..i + same_step]
                    .iter()
                    .map(|&j| step_ref(&o.real[j])),
            );
        }
        i += same_step;
    }
    parts.join(", ")
}

fn same_cell(o: &Outcome) -> String {
    match o.verdict {
        Verdict::Identical => "yes".to_string(),
        Verdict::Declared => format!("declared ({})", o.declared.as_deref().unwrap_or("?")),
        Verdict::Differ => format!("**no** (step {})", differing_steps(o)),
    }
}

/// The full report: the table, the differences, warnings, and the totals as the last line.
pub fn render(outcomes: &[Outcome]) -> String {
    let mut out = String::new();
    out.push_str("| scenario | real DataNode | dn-sim | same? |\n|---|---|---|---|\n");
    for o in outcomes {
        writeln!(
            out,
            "| {} | {} | {} | {} |",
            escape(&o.name),
            cell(&o.real),
            cell(&o.sim),
            same_cell(o)
        )
        .unwrap();
    }
    let differing: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| !o.differing.is_empty())
        .collect();
    if !differing.is_empty() {
        out.push_str("\n## Differences\n");
        for o in differing {
            let declared = match (&o.verdict, &o.declared) {
                (Verdict::Declared, Some(d)) => format!(" (declared: {d})"),
                _ => String::new(),
            };
            write!(out, "\n### {}{declared}\n", o.name).unwrap();
            if !o.about.is_empty() {
                writeln!(out, "{}", o.about).unwrap();
            }
            // repetitions of a step that differ as the one before are listed, not shown again
            let mut shown: Option<usize> = None;
            let mut again: Vec<String> = Vec::new();
            let flush = |out: &mut String, again: &mut Vec<String>| {
                if !again.is_empty() {
                    writeln!(out, "\nstep {}: the same difference", again.join(", ")).unwrap();
                    again.clear();
                }
            };
            for &i in &o.differing {
                let (real, sim) = (&o.real[i], &o.sim[i]);
                if let Some(p) = shown
                    && o.real[p].step == real.step
                    && o.real[p].normalized == real.normalized
                    && o.sim[p].normalized == sim.normalized
                {
                    again.push(step_ref(real));
                    continue;
                }
                flush(&mut out, &mut again);
                shown = Some(i);
                write!(out, "\nstep {} ({}):\n", step_ref(real), real.label).unwrap();
                out.push_str("```diff\n--- real DataNode\n+++ dn-sim\n");
                out.push_str(&diff(&pretty(&real.normalized), &pretty(&sim.normalized)));
                out.push_str("```\n");
            }
            flush(&mut out, &mut again);
        }
    }
    let mut warnings = Vec::new();
    for o in outcomes {
        if o.verdict == Verdict::Identical
            && let Some(d) = &o.declared
        {
            warnings.push(format!(
                "warning: {} declares {d}, but both targets answered the same: the declaration can go",
                o.name
            ));
        }
    }
    if !warnings.is_empty() {
        out.push('\n');
        for w in warnings {
            out.push_str(&w);
            out.push('\n');
        }
    }
    let (identical, declared, differ) = totals(outcomes);
    write!(
        out,
        "\n{identical} identical, {declared} declared, {differ} differ\n"
    )
    .unwrap();
    out
}

/// (identical, declared, differ)
pub fn totals(outcomes: &[Outcome]) -> (usize, usize, usize) {
    let count = |v: Verdict| outcomes.iter().filter(|o| o.verdict == v).count();
    (
        count(Verdict::Identical),
        count(Verdict::Declared),
        count(Verdict::Differ),
    )
}

fn pretty(json: &Json) -> Vec<String> {
    serde_json::to_string_pretty(json)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A line diff of two texts: common lines with `  `, lines only in `a` with `- `, only in `b`
/// with `+ ` (longest common subsequence).
pub fn diff(a: &[String], b: &[String]) -> String {
    let mut out = String::new();
    if a.len().saturating_mul(b.len()) > 4_000_000 {
        for l in a {
            writeln!(out, "- {l}").unwrap();
        }
        for l in b {
            writeln!(out, "+ {l}").unwrap();
        }
        return out;
    }
    let (n, m) = (a.len(), b.len());
    // lcs[i][j] = LCS length of a[i..] and b[j..]
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            writeln!(out, "  {}", a[i]).unwrap();
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            writeln!(out, "- {}", a[i]).unwrap();
            i += 1;
        } else {
            writeln!(out, "+ {}", b[j]).unwrap();
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn step(step: usize, answer: Json, compare: bool) -> StepResult {
        StepResult {
            step,
            repeat: 1,
            repeats: 1,
            label: "Echo".into(),
            compare,
            normalized: crate::normalize::normalize_answer(&answer),
            answer,
        }
    }

    #[test]
    fn summaries() {
        assert_eq!(
            summarize(&json!({"response": {"result": "SUCCESS", "message": "ok"}})),
            "SUCCESS"
        );
        assert_eq!(
            summarize(
                &json!({"response": {"result": "CONTAINER_NOT_FOUND", "message": "ContainerID 5 does not exist"}})
            ),
            "CONTAINER_NOT_FOUND \"ContainerID 5 does not exist\""
        );
        assert_eq!(
            summarize(&json!({"response": {"cmdType": "Echo"}})),
            "(no result)"
        );
        assert_eq!(summarize(&json!({"response": {"result": 77}})), "77");
        assert_eq!(
            summarize(
                &json!({"status": {"code": "INTERNAL", "message": "Invalid protobuf byte sequence"}})
            ),
            "status INTERNAL \"Invalid protobuf byte sequence\""
        );
        assert_eq!(
            summarize(&json!({"status": {"code": "CANCELLED", "message": ""}})),
            "status CANCELLED"
        );
        assert_eq!(
            summarize(&json!({"no_answer": "timeout"})),
            "no answer (timeout)"
        );
        let long = "x".repeat(200);
        assert_eq!(
            summarize(&json!({"status": {"code": "INTERNAL", "message": long}}))
                .chars()
                .count(),
            "status INTERNAL \"\"…".chars().count() + MAX_MESSAGE
        );
    }

    #[test]
    fn cells_collapse_repeats_and_mark_setup_steps() {
        let ok = json!({"response": {"result": "SUCCESS"}});
        let steps = vec![
            step(1, ok.clone(), false),
            step(2, ok.clone(), true),
            step(3, ok.clone(), true),
            step(
                4,
                json!({"status": {"code": "INTERNAL", "message": "a|b"}}),
                true,
            ),
        ];
        assert_eq!(
            cell(&steps),
            "(SUCCESS); SUCCESS ×2; status INTERNAL \"a\\|b\""
        );
    }

    #[test]
    fn repeated_differences_are_listed_once() {
        let ok = json!({"response": {"result": "SUCCESS"}});
        let bad = json!({"response": {"result": "IO_EXCEPTION"}});
        let rep = |step: usize, repeat: u32, repeats: u32, answer: &Json| StepResult {
            repeat,
            repeats,
            ..super::tests::step(step, answer.clone(), true)
        };
        let mut o = Outcome {
            name: "r".into(),
            family: "f".into(),
            about: String::new(),
            declared: None,
            real: vec![
                rep(1, 1, 3, &ok),
                rep(1, 2, 3, &ok),
                rep(1, 3, 3, &ok),
                rep(2, 1, 1, &ok),
            ],
            sim: vec![
                rep(1, 1, 3, &bad),
                rep(1, 2, 3, &bad),
                rep(1, 3, 3, &bad),
                rep(2, 1, 1, &bad),
            ],
            verdict: Verdict::Identical,
            differing: vec![],
        };
        o.judge();
        let text = render(std::slice::from_ref(&o));
        assert!(text.contains("**no** (step 1 (×3), 2)"), "{text}");
        assert!(text.contains("\nstep 1#1 (Echo):\n"), "{text}");
        assert!(
            text.contains("\nstep 1#2, 1#3: the same difference\n"),
            "{text}"
        );
        assert!(text.contains("\nstep 2 (Echo):\n"), "{text}");
        o.differing = vec![0, 2];
        assert_eq!(differing_steps(&o), "1#1, 1#3");
    }

    #[test]
    fn line_diff() {
        let a: Vec<String> = ["{", "  \"a\": 1,", "  \"b\": 2", "}"]
            .map(String::from)
            .to_vec();
        let b: Vec<String> = ["{", "  \"a\": 1,", "  \"b\": 3", "}"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            diff(&a, &b),
            "  {\n    \"a\": 1,\n-   \"b\": 2\n+   \"b\": 3\n  }\n"
        );
        assert_eq!(
            diff(&a, &a)
                .lines()
                .filter(|l| l.starts_with(['-', '+']))
                .count(),
            0
        );
    }

    #[test]
    fn totals_line_and_declared_warning() {
        let ok = json!({"response": {"result": "SUCCESS"}});
        let bad = json!({"response": {"result": "IO_EXCEPTION", "message": "x"}});
        let outcome = |name: &str, sim: &Json, declared: Option<&str>| {
            let mut o = Outcome {
                name: name.into(),
                family: "echo".into(),
                about: String::new(),
                declared: declared.map(String::from),
                real: vec![step(1, ok.clone(), true)],
                sim: vec![step(1, sim.clone(), true)],
                verdict: Verdict::Identical,
                differing: vec![],
            };
            o.judge();
            o
        };
        let outcomes = vec![
            outcome("same", &ok, None),
            outcome("declared-same", &ok, Some("D1")),
            outcome("declared-diff", &bad, Some("D2")),
            outcome("diff", &bad, None),
        ];
        let text = render(&outcomes);
        assert!(
            text.ends_with("\n2 identical, 1 declared, 1 differ\n"),
            "{text}"
        );
        assert!(
            text.contains("| same | SUCCESS | SUCCESS | yes |"),
            "{text}"
        );
        assert!(
            text.contains("| diff | SUCCESS | IO_EXCEPTION \"x\" | **no** (step 1) |"),
            "{text}"
        );
        assert!(
            text.contains("| declared-diff | SUCCESS | IO_EXCEPTION \"x\" | declared (D2) |"),
            "{text}"
        );
        assert!(
            text.contains("warning: declared-same declares D1"),
            "{text}"
        );
        assert!(text.contains("### diff\n"), "{text}");
        assert!(text.contains("-     \"result\": \"SUCCESS\""), "{text}");
        assert!(
            text.contains("+     \"result\": \"IO_EXCEPTION\""),
            "{text}"
        );
    }
}
