use clap::Parser as _;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = conformance::cli::Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("conformance: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    runtime.block_on(conformance::runner::main(args))
}
