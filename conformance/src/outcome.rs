//! What a run found: each side's answers to a scenario's steps and the verdict. The runner makes
//! them, the report prints them; neither knows the other.

use serde::Serialize;
use serde_json::{Value as Json, json};

/// One answer of one side.
#[derive(Debug, Clone, Serialize)]
pub struct StepResult {
    /// The step's number in the scenario (1-based).
    pub step: usize,
    /// Which repetition of the step (1-based), of `repeats`.
    pub repeat: u32,
    pub repeats: u32,
    pub label: String,
    pub compare: bool,
    pub answer: Json,
    pub normalized: Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Identical,
    Declared,
    Differ,
}

/// A scenario's answers on both sides and the verdict.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub name: String,
    pub family: String,
    pub about: String,
    pub declared: Option<String>,
    pub real: Vec<StepResult>,
    pub sim: Vec<StepResult>,
    pub verdict: Verdict,
    /// Indices into `real`/`sim` of the compared answers that differ.
    pub differing: Vec<usize>,
}

fn is_runner_error(answer: &Json) -> bool {
    answer.get("runner_error").is_some()
}

impl Outcome {
    /// Compares the answers and sets `differing` and `verdict`.
    pub fn judge(&mut self) {
        let n = self.real.len().max(self.sim.len());
        self.differing = (0..n)
            .filter(|&i| match (self.real.get(i), self.sim.get(i)) {
                (Some(r), Some(s)) => {
                    is_runner_error(&r.answer)
                        || is_runner_error(&s.answer)
                        || ((r.compare || s.compare) && r.normalized != s.normalized)
                }
                _ => true,
            })
            .collect();
        // an index missing on one side still needs a row on both for the report
        let pad = |side: &mut Vec<StepResult>, other: &Vec<StepResult>| {
            while side.len() < other.len() {
                let mut missing = other[side.len()].clone();
                missing.answer = json!({"runner_error": "no such step on this side"});
                missing.normalized = missing.answer.clone();
                side.push(missing);
            }
        };
        let real = self.real.clone();
        pad(&mut self.sim, &real);
        let sim = self.sim.clone();
        pad(&mut self.real, &sim);
        self.verdict = if self.differing.is_empty() {
            Verdict::Identical
        } else if self.declared.is_some() {
            Verdict::Declared
        } else {
            Verdict::Differ
        };
    }
}
