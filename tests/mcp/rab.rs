//! The paper's benchmark, RAB (`integration/rab/`): the six scenarios with the paper's fixtures,
//! played by the scripted reference strategy through the harness's proxy against `rwfs mcp`
//! and against the reference server (`resilient-write` 0.3.0), three trials each, judged from
//! the workspaces, journals and transcripts they leave; and the driver's agent-command mode,
//! with the scripted strategy as the command and with a command that does nothing, and one
//! trial judged again after its output was changed behind the server's back.
//!
//! The scores are the judge's (`integration/rab/judge.py`); these tests assert what must hold of
//! them: rwfs passes every scenario in every trial, and the reference fails where it must (its
//! server has no `rr_*` tools — they are the separate resilient-read, see docs/architecture.md,
//! The reference — and its `anthropic_oat` pattern needs 40 characters where the paper's S1
//! template token has 32). `--nocapture` shows the side-by-side table.

use std::ffi::OsString;
use std::path::Path;

use serde_json::Value;

use super::clients::{python, python_script, reference_server, rwfs};
use crate::support::Ws;

const SCENARIOS: [&str; 6] = ["S0", "S1", "S2", "S3", "S4", "S5"];

/// `rab.py run ARGS`; the results it writes with `--json`.
#[track_caller]
fn rab(dir: &Ws, args: &[OsString]) -> Value {
    let json = dir.path().join("rab.json");
    let mut all: Vec<OsString> = vec!["run".into(), "--out".into(), dir.path().join("trials").into()];
    all.extend(["--json".into(), json.clone().into_os_string()]);
    all.extend_from_slice(args);
    python_script("integration/rab/rab.py", &all);
    serde_json::from_slice(&std::fs::read(&json).expect("rab.py wrote its JSON")).expect("JSON results")
}

fn server(name: &str, binary: &Path) -> [OsString; 2] {
    let mut spec = OsString::from(format!("{name}="));
    spec.push(binary);
    ["--server".into(), spec]
}

struct Scenario<'a> {
    name: &'a str,
    pass_at_1: f64,
    trials: &'a [Value],
}

fn scenario<'a>(results: &'a Value, server: &str, name: &'a str) -> Scenario<'a> {
    let at = &results[server][name];
    let trials = at["trials"].as_array().unwrap_or_else(|| panic!("{server} {name}: no trials in {results}"));
    Scenario { name, pass_at_1: at["pass_at_1"].as_f64().unwrap(), trials }
}

impl Scenario<'_> {
    /// `component` of every trial.
    fn each(&self, component: &str) -> Vec<i64> {
        self.trials.iter().map(|t| t["components"][component].as_i64().unwrap()).collect()
    }

    /// Every trial's judge wrote `note` (its points and what it checked).
    #[track_caller]
    fn noted(&self, note: &str) {
        self.trials.iter().for_each(|trial| noted(self.name, trial, note));
    }
}

#[track_caller]
fn noted(name: &str, verdict: &Value, note: &str) {
    let notes: Vec<&str> = verdict["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    assert!(notes.iter().any(|n| n.starts_with(note)), "{name}: no note {note:?} in {notes:#?}");
}

#[test]
fn rab_scripted_strategy_passes_every_scenario_on_rwfs_and_the_reference_fails_where_the_notes_say() {
    let dir = Ws::new();
    let mut args = vec!["--trials".into(), "3".into()];
    args.extend(server("rwfs", Path::new(rwfs())));
    args.extend(server("reference", &reference_server()));
    let results = rab(&dir, &args);

    for name in SCENARIOS {
        let rwfs = scenario(&results, "rwfs", name);
        assert_eq!(rwfs.trials.len(), 3, "{name}: three trials");
        let scores: Vec<i64> = rwfs.trials.iter().map(|t| t["score"].as_i64().unwrap()).collect();
        assert!(scores.iter().all(|&s| s >= 70), "rwfs {name}: every trial passes the judge, scores {scores:?}");
        assert_eq!(rwfs.pass_at_1, 1.0, "rwfs {name}: Pass@1");
    }
    // The judge saw what each scenario is about, on rwfs: the risk report pointing at the
    // token, the injected chunk failure and its re-submission, the drift refused and resumed.
    scenario(&results, "rwfs", "S1").noted("+10 error_recovery: the risk report or an envelope pointed at line 5");
    scenario(&results, "rwfs", "S2").noted("+15 error_recovery: the failed chunk sent again and accepted");
    scenario(&results, "rwfs", "S3").noted("+10 error_recovery: a read refused as stale_precondition");
    scenario(&results, "rwfs", "S3").noted("+15 error_recovery: a new cursor at the offset reached, read to EOF");

    // The reference has no rr_* tools: S0 reads the 550 KB log in one host read (over the
    // budget, no pages) and S3 never makes a cursor, so no drift is seen; both fail.
    let s0 = scenario(&results, "reference", "S0");
    assert_eq!(s0.pass_at_1, 0.0, "reference S0 fails");
    assert_eq!(s0.each("tool_selection"), [0, 0, 0], "reference S0: no rr_stat, no pages");
    s0.noted("-10 efficiency: largest answer");
    let s3 = scenario(&results, "reference", "S3");
    assert_eq!(s3.pass_at_1, 0.0, "reference S3 fails");
    assert_eq!(s3.each("error_recovery"), [0, 0, 0], "reference S3: no cursor, no drift refused");
    s3.noted("-10 error_recovery: a read refused as stale_precondition");
    // Its risk score misses the paper's own S1 token; the strategy still finds it from the spec.
    let s1 = scenario(&results, "reference", "S1");
    s1.noted("-10 error_recovery: the risk report or an envelope pointed at line 5");
    assert_eq!(s1.pass_at_1, 1.0, "reference S1 passes without the warning");
    // S2, S4 and S5 need only small reads (a host read does): it passes them.
    for name in ["S2", "S4", "S5"] {
        assert_eq!(scenario(&results, "reference", name).pass_at_1, 1.0, "reference {name} passes");
    }
    scenario(&results, "reference", "S2").noted("+15 error_recovery: the failed chunk sent again and accepted");
    scenario(&results, "reference", "S4").noted("-5 tool_selection: A: rr_stat with sha256");
}

#[test]
fn rab_agent_command_mode_judges_what_the_command_left() {
    let dir = Ws::new();
    let rab_py = Path::new(env!("CARGO_MANIFEST_DIR")).join("integration/rab/rab.py");
    let play = format!("'{}' '{}' play", python().display(), rab_py.display());
    let mut args = vec!["--trials".into(), "1".into(), "--agent".into(), play.into()];
    args.extend(server("rwfs", Path::new(rwfs())));
    let results = rab(&dir, &args);
    for name in SCENARIOS {
        assert_eq!(scenario(&results, "rwfs", name).pass_at_1, 1.0, "the scripted strategy as a command passes {name}");
    }
    // S4 ran the command twice, as two agents with their own sessions.
    scenario(&results, "rwfs", "S4").noted("+10 error_recovery: B read the handoff before writing");

    // The judge goes by what is on disk: the token put back into config.yaml behind the
    // server's back, the same transcript now fails (and the file matches no journal row).
    let trial = dir.path().join("trials/rwfs/S1/trial-1");
    let template = std::fs::read(trial.join("ws/config.template.yaml")).unwrap();
    std::fs::write(trial.join("ws/config.yaml"), template).unwrap();
    let again = python_script("integration/rab/rab.py", &[OsString::from("judge"), trial.into()]);
    let again: Value = serde_json::from_str(&again).expect("rab.py judge prints JSON");
    assert_eq!(again["passed"], false, "{again}");
    noted("S1 tampered", &again, "-15 completion: no trace of the token in it");
    noted("S1 tampered", &again, "-10 tool_selection: config.yaml by rw_safe_write, journaled with its sha256");

    let idle = Ws::new();
    let mut args = vec!["--trials".into(), "1".into(), "--agent".into(), "cat >/dev/null".into()];
    args.extend(server("rwfs", Path::new(rwfs())));
    let results = rab(&idle, &args);
    for name in SCENARIOS {
        let nothing = scenario(&results, "rwfs", name);
        assert_eq!(nothing.pass_at_1, 0.0, "{name}: an agent that does nothing fails");
        assert_eq!(nothing.each("completion"), [0], "{name}: and completes nothing");
    }
}
