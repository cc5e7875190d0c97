//! Flags.

use clap::Parser;
use regex::Regex;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "conformance",
    version,
    about = "Sends the same request sequences to a real Ozone DataNode and to dn-sim and compares the answers",
    long_about = "Sends the same request sequences (conformance/scenarios/*.json) to a real Apache \
        Ozone DataNode and to dn-sim, compares the answers field by field after normalisation and \
        prints a markdown table; the last line is `N identical, M declared, K differ`. Exit code: \
        0 when nothing differs beyond what is declared, 1 when something does, 2 for bad flags, \
        unreadable scenarios or targets that fail to start."
)]
pub struct Args {
    /// Scenario files, or directories whose *.json files are read (repeatable; default
    /// conformance/scenarios).
    #[arg(long = "scenarios", value_name = "PATH")]
    pub scenarios: Vec<PathBuf>,

    /// Run only the scenarios whose name matches this regular expression.
    #[arg(long, value_name = "REGEX", value_parser = parse_regex)]
    pub only: Option<Regex>,

    /// List the selected scenarios and exit without starting anything.
    #[arg(long)]
    pub list: bool,

    /// Also write every answer (raw and normalised) to this JSON file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Ozone version under test: selects scenarios by their `versions` and is passed to dn-sim.
    #[arg(long, default_value = "2.2", value_parser = ["2.0", "2.1", "2.2"])]
    pub ozone_version: String,

    /// The pre-created OPEN containers of both targets, handed out to scenarios as $C1…$C9
    /// (IDs and ranges: 1-300, 1,2,7,10-20).
    #[arg(long, value_name = "LIST", default_value = "1-300", value_parser = parse_containers)]
    pub containers: ContainerPool,

    /// IDs for $NEW1…$NEW9 (containers that exist nowhere) are this number + 1, + 2, …
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    pub new_container_base: u64,

    /// Shell command line starting a real DataNode; the runner appends `--containers LIST --info
    /// FILE` and `-D key=value` per config key (default: scripts/real-datanode.sh --ozone-version
    /// <--ozone-version>.0).
    #[arg(long, value_name = "CMD", conflicts_with = "real_addr")]
    pub real_cmd: Option<String>,

    /// Use an already running real DataNode's client port instead of starting one.
    #[arg(long, value_name = "HOST:PORT", requires = "real_uuid")]
    pub real_addr: Option<String>,

    /// The UUID of the DataNode at --real-addr ($DN).
    #[arg(long, value_name = "UUID", requires = "real_addr")]
    pub real_uuid: Option<String>,

    /// The HTTP port (/prom) of the DataNode at --real-addr.
    #[arg(long, value_name = "HOST:PORT", requires = "real_addr")]
    pub real_http: Option<String>,

    /// The Ratis client port of the DataNode at --real-addr (`ratis` scenarios).
    #[arg(long, value_name = "HOST:PORT", requires = "real_addr")]
    pub real_ratis: Option<String>,

    /// The pipeline (Raft group) of the DataNode at --real-addr (`$PIPELINE`).
    #[arg(long, value_name = "UUID", requires = "real_ratis")]
    pub real_pipeline: Option<String>,

    /// Shell command line starting dn-sim; the runner appends `--listen`, `--metrics-listen`,
    /// `--containers`, the UUID and version flags and `-D key=value` per config key.
    #[arg(
        long,
        value_name = "CMD",
        default_value = "target/debug/dn-sim",
        conflicts_with = "sim_addr"
    )]
    pub sim_cmd: String,

    /// Extra arguments for dn-sim, inserted before the appended ones (shell words).
    #[arg(
        long,
        value_name = "ARGS",
        default_value = "",
        allow_hyphen_values = true
    )]
    pub sim_extra_args: String,

    /// dn-sim's flag for the DataNode UUID; passed only when `CMD --help` lists it ("" = never).
    #[arg(
        long,
        value_name = "FLAG",
        default_value = "--datanode-uuid",
        allow_hyphen_values = true
    )]
    pub sim_uuid_flag: String,

    /// dn-sim's flag for the Ozone version; passed only when `CMD --help` lists it ("" = never).
    #[arg(
        long,
        value_name = "FLAG",
        default_value = "--ozone-version",
        allow_hyphen_values = true
    )]
    pub sim_version_flag: String,

    /// Use an already running dn-sim's client port instead of starting one.
    #[arg(long, value_name = "HOST:PORT", requires = "sim_uuid")]
    pub sim_addr: Option<String>,

    /// The UUID of the dn-sim at --sim-addr ($DN).
    #[arg(long, value_name = "UUID", requires = "sim_addr")]
    pub sim_uuid: Option<String>,

    /// The HTTP port (/prom) of the dn-sim at --sim-addr.
    #[arg(long, value_name = "HOST:PORT", requires = "sim_addr")]
    pub sim_http: Option<String>,

    /// The Ratis client port of the dn-sim at --sim-addr (`ratis` scenarios).
    #[arg(long, value_name = "HOST:PORT", requires = "sim_addr")]
    pub sim_ratis: Option<String>,

    /// The pipeline (Raft group) of the dn-sim at --sim-addr (`$PIPELINE`).
    #[arg(long, value_name = "UUID", requires = "sim_ratis")]
    pub sim_pipeline: Option<String>,

    /// How long a started target may take to be ready.
    #[arg(long, value_name = "DURATION", default_value = "300s", value_parser = parse_duration)]
    pub start_timeout: Duration,

    /// How long to wait for each answer.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub answer_timeout: Duration,

    /// Before each /prom reading, wait until the listed metrics have not changed for this long (a
    /// real DataNode publishes them once per metrics period, 1 s in interop/ozone); 0 = one scrape.
    #[arg(long, value_name = "DURATION", default_value = "1500ms", value_parser = parse_duration)]
    pub prom_settle: Duration,

    /// Directory for the targets' logs and info files (default: a new one under the temporary
    /// directory, removed after a run whose targets all started).
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
}

/// `--containers`: the list as given (passed on to the targets) and its IDs in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerPool {
    pub text: String,
    pub ids: Vec<u64>,
}

/// The most container IDs `--containers` may name.
const MAX_CONTAINERS: u64 = 1_000_000;

pub fn parse_containers(text: &str) -> Result<ContainerPool, String> {
    let mut ids = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        let number = |s: &str| {
            s.trim()
                .parse::<u64>()
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| format!("'{s}' is not a container ID (1 or more)"))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (number(a)?, number(b)?);
                if a > b {
                    return Err(format!("'{part}' is an empty range"));
                }
                if b - a >= MAX_CONTAINERS {
                    return Err(format!("'{part}' names over {MAX_CONTAINERS} containers"));
                }
                ids.extend(a..=b);
            }
            None => ids.push(number(part)?),
        }
        if ids.len() as u64 > MAX_CONTAINERS {
            return Err(format!("over {MAX_CONTAINERS} containers"));
        }
    }
    ids.sort_unstable();
    ids.dedup();
    Ok(ContainerPool {
        text: text.trim().to_string(),
        ids,
    })
}

fn parse_regex(text: &str) -> Result<Regex, String> {
    Regex::new(text).map_err(|e| e.to_string())
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    common::units::parse_duration(text).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_lists() {
        assert_eq!(parse_containers("1-3").unwrap().ids, vec![1, 2, 3]);
        assert_eq!(
            parse_containers("7, 1,2-3,2").unwrap().ids,
            vec![1, 2, 3, 7]
        );
        assert_eq!(parse_containers("1-300").unwrap().text, "1-300");
        for bad in ["", "0", "3-1", "x", "1-", "1-2000000"] {
            assert!(parse_containers(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn flags() {
        let a = Args::try_parse_from(["conformance"]).unwrap();
        assert_eq!(a.ozone_version, "2.2");
        assert_eq!(a.sim_cmd, "target/debug/dn-sim");
        assert_eq!(a.sim_uuid_flag, "--datanode-uuid");
        assert_eq!(a.start_timeout, Duration::from_secs(300));
        assert_eq!(a.containers.ids.len(), 300);
        assert!(Args::try_parse_from(["conformance", "--ozone-version", "1.4"]).is_err());
        assert!(Args::try_parse_from(["conformance", "--real-addr", "h:1"]).is_err());
        assert!(
            Args::try_parse_from([
                "conformance",
                "--real-addr",
                "h:1",
                "--real-uuid",
                "u",
                "--real-cmd",
                "x"
            ])
            .is_err()
        );
        assert!(Args::try_parse_from(["conformance", "--only", "("]).is_err());
        let a = Args::try_parse_from([
            "conformance",
            "--sim-extra-args",
            "--threads 1",
            "--sim-uuid-flag",
            "",
        ])
        .unwrap();
        assert_eq!(a.sim_extra_args, "--threads 1");
        assert_eq!(a.sim_uuid_flag, "");
    }
}
