use clap::Parser;
use dn_sim::cli::{Args, Cli, Command};
use std::process::ExitCode;

/// Why dn-sim exits non-zero (docs/dn-sim.md, "Exit codes"). Each is one line on stderr.
enum Failure {
    /// Bad flags or settings (flags, `-D`, `DN_SIM_*`, `OZONE-SITE.XML_*`, TLS files that do
    /// not load): exit code 2, nothing was started.
    Usage(String),
    /// The server could not start: no runtime, a port that cannot be bound, a store that cannot
    /// be opened: exit code 1. healthcheck: the target is not serving or not reachable: 1.
    Failed(String),
}

impl Failure {
    fn exit(self, prefix: &str) -> ExitCode {
        let (message, code) = match self {
            Failure::Usage(m) => (m, 2),
            Failure::Failed(m) => (m, 1),
        };
        eprintln!("{prefix}{message}");
        ExitCode::from(code)
    }
}

fn main() -> ExitCode {
    dn_sim::net::server::tune_allocator();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            let _ = e.print(); // --help, --version
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let text = e.to_string();
            eprintln!(
                "dn-sim: {}",
                text.lines().next().unwrap_or("invalid arguments")
            );
            return ExitCode::from(2);
        }
    };
    match cli.into_command() {
        Command::Serve(args) => serve(&args),
        Command::Healthcheck(args) => match args
            .check_flags()
            .map_err(Failure::Usage)
            .and_then(|()| dn_sim::net::health::healthcheck(&args).map_err(Failure::Failed))
        {
            Ok(message) => {
                println!("dn-sim healthcheck: {message}");
                ExitCode::SUCCESS
            }
            Err(f) => f.exit("dn-sim healthcheck: "),
        },
    }
}

fn serve(args: &Args) -> ExitCode {
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => f.exit("dn-sim: "),
    }
}

/// Serves until SIGINT or SIGTERM.
fn run(args: &Args) -> Result<(), Failure> {
    tracing_subscriber::fmt()
        .with_env_filter(
            // h2 warns once per connection it ends for abuse (a rapid reset: dozens a second);
            // dn_sim_connections_closed_total and dn_sim_http2_goaways_sent_total count them.
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,h2=error".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let fleet = args
        .fleet_config()
        .map_err(|e| Failure::Usage(format!("error: {e}")))?;
    let config = &fleet.base;
    // The TLS files given by --tls-cert, --tls-key, --tls-client-ca are the user's input: one
    // that does not load (or a key that does not fit) is a bad setting, checked before the
    // server starts (which loads them again).
    if let Some(tls) = &config.tls {
        tls.server_config().map_err(Failure::Usage)?;
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = args.threads {
        builder.worker_threads(n as usize);
    }
    let runtime = builder
        .enable_all()
        .build()
        .map_err(|e| Failure::Failed(format!("cannot start the runtime: {e}")))?;
    // The settings were valid: a port that cannot be bound (in use, not a local address) or a
    // store that cannot be opened is a server that could not start.
    let ready = args.ready_file.as_deref();
    let served = if fleet.len() == 1 {
        runtime.block_on(dn_sim::run_until_signal(fleet.base, ready))
    } else {
        runtime.block_on(dn_sim::net::fleet::run_until_signal(fleet, ready))
    };
    served.map_err(|e| Failure::Failed(format!("{e:#}")))
}
