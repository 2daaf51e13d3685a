//! `recap`, the one binary. Every role is a library function and the command line is
//! defined in the library (`src/cli.rs`); this file only parses it and starts the role
//! asked for: `serve` (the embedded edition: projector + REST + MCP over one data dir),
//! `events append` (adds contract events to the embedded log or publishes them to
//! Kafka), `events dead-letters` (prints the invalid events set aside), the distributed roles `projector`, `query-api`, `mcp`, `webhooks` and `migrate`,
//! and `listen` (a webhook receiver for development).

use std::process::ExitCode;

use clap::Parser;
use recap::cli::{self, Cli, Command, EventsCommand};
use recap::telemetry::Telemetry;
use recap::{distributed, listen, serve, webhooks};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let telemetry = Telemetry::init(cli.command.role());
    let code = match cli.command {
        Command::Events(EventsCommand::Append(args)) => match cli::append(args) {
            Ok(summary) => {
                println!("{summary}");
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("recap events append: {error}");
                ExitCode::FAILURE
            }
        },
        Command::Events(EventsCommand::DeadLetters(args)) => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            match cli::dead_letters(args, &mut out) {
                Ok((summary, warnings)) => {
                    for warning in warnings {
                        eprintln!("recap events dead-letters: {warning}");
                    }
                    eprintln!("{summary}");
                    ExitCode::SUCCESS
                }
                Err(error) => {
                    eprintln!("recap events dead-letters: {error}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Projector(config) => run_async("recap projector", distributed::projector(config, telemetry.clone())),
        Command::Migrate(config) => run_async("recap migrate", distributed::migrate(config)),
        Command::QueryApi(config) => run_async("recap query-api", distributed::query_api(config, telemetry.clone())),
        Command::Mcp(config) => run_async("recap mcp", distributed::mcp(config, telemetry.clone())),
        Command::Webhooks(config) => run_async("recap webhooks", webhooks::role(config, telemetry.clone())),
        Command::Serve(config) => run_async("recap serve", serve::run(config, telemetry.clone())),
        Command::Listen(args) => run_async("recap listen", listen::run(args)),
    };
    // The spans of the last requests and the last metrics go out before the exit.
    telemetry.shutdown();
    code
}

/// Runs a role on a multi-threaded runtime and turns its outcome into an exit code.
fn run_async(role: &str, future: impl std::future::Future<Output = anyhow::Result<()>>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("{role}: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(future) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{role}: {error:#}");
            ExitCode::FAILURE
        }
    }
}
