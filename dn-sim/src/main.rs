use clap::Parser;
use dn_sim::cli::{Args, Cli, Command};
use std::process::ExitCode;

fn main() -> ExitCode {
    dn_sim::server::tune_allocator();
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
            .map_err(|e| (e, 2))
            .and_then(|()| dn_sim::health::healthcheck(&args).map_err(|e| (e, 1)))
        {
            Ok(message) => {
                println!("dn-sim healthcheck: {message}");
                ExitCode::SUCCESS
            }
            // 2: a wrong flag; 1: not serving, or not reachable.
            Err((message, code)) => {
                eprintln!("dn-sim healthcheck: {message}");
                ExitCode::from(code)
            }
        },
    }
}

fn serve(args: &Args) -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            // h2 warns once per connection it ends for abuse (a rapid reset: dozens a second);
            // dn_sim_connections_closed_total and dn_sim_http2_goaways_sent_total count them.
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,h2=error".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let config = match args.config() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("dn-sim: error: {e}");
            return ExitCode::from(2);
        }
    };
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = args.threads {
        builder.worker_threads(n as usize);
    }
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("dn-sim: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let served = match &args.ready_file {
        None => runtime.block_on(dn_sim::run_until_signal(config)),
        Some(path) => runtime.block_on(serve_with_ready_file(config, path)),
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dn-sim: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// `run_until_signal`, and in between the bound addresses written to `path` (--ready-file).
async fn serve_with_ready_file(
    config: dn_sim::Config,
    path: &std::path::Path,
) -> anyhow::Result<()> {
    use anyhow::Context;
    let server = dn_sim::start(config).await?;
    let mut text = format!("client {}\n", server.local_addr());
    if let Some(admin) = server.metrics_addr() {
        text.push_str(&format!("admin {admin}\n"));
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .with_context(|| format!("cannot write --ready-file {}", path.display()))?;
    tracing::info!(
        addr = %server.local_addr(),
        metrics = ?server.metrics_addr(),
        ready_file = %path.display(),
        "dn-sim serving XceiverClientProtocolService"
    );
    let ctrl_c = tokio::signal::ctrl_c();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing a SIGTERM handler")?;
    tokio::select! {
        _ = ctrl_c => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down: no new connections, finishing in-flight requests");
    if !server.shutdown().await {
        tracing::warn!("grace period over; closing remaining streams");
    }
    Ok(())
}
