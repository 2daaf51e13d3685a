//! `recap`, the one binary. Every role is a library function; this file only parses the
//! command line (flags and `RECAP_*` variables) and starts the role asked for:
//! `serve` (the embedded edition: projector + REST + MCP over one data dir) and
//! `events append` (adds contract events to the embedded log).

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use recap::serve;

#[derive(Parser, Debug)]
#[command(name = "recap", version, about = "The read side of the meeting-notes service: REST API v1 and MCP server over a projected read model")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the embedded edition: projector, REST API and MCP server in one process over one data dir.
    Serve(serve::ServeConfig),
    /// Work with the event stream.
    #[command(subcommand)]
    Events(EventsCommand),
}

#[derive(Subcommand, Debug)]
enum EventsCommand {
    /// Append contract events (JSON Lines, one envelope per line) to the embedded log.
    /// Reads standard input when no file is named. A file with a line that is not a JSON
    /// object is refused whole and nothing is appended.
    Append(AppendArgs),
}

#[derive(Args, Debug)]
struct AppendArgs {
    /// The data dir whose log receives the events.
    #[arg(long, env = "RECAP_DATA_DIR", default_value = "./recap-data")]
    data_dir: PathBuf,
    /// Files of JSON Lines; standard input when none.
    files: Vec<PathBuf>,
}

fn append(args: AppendArgs) -> Result<String, String> {
    std::fs::create_dir_all(&args.data_dir).map_err(|error| format!("cannot create data dir {}: {error}", args.data_dir.display()))?;
    let log = recap_projector::EventLog::new(args.data_dir.join(serve::LOG_FILE));
    // Every input is checked before anything is written: one bad line refuses the lot.
    let mut validated = Vec::new();
    if args.files.is_empty() {
        let mut content = Vec::new();
        std::io::stdin().read_to_end(&mut content).map_err(|error| format!("reading standard input: {error}"))?;
        validated.extend(recap_projector::validate_lines("<stdin>", &content).map_err(|error| error.to_string())?);
    } else {
        for file in &args.files {
            let content = std::fs::read(file).map_err(|error| format!("{}: {error}", file.display()))?;
            validated.extend(recap_projector::validate_lines(&file.display().to_string(), &content).map_err(|error| error.to_string())?);
        }
    }
    let events = validated.iter().filter(|&&byte| byte == b'\n').count();
    let bytes = log.append_validated(&validated).map_err(|error| error.to_string())?;
    Ok(format!("appended {events} events ({bytes} bytes) to {}", log.path().display()))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("RECAP_LOG").unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")))
        .with_writer(std::io::stderr)
        .init();
    match cli.command {
        Command::Events(EventsCommand::Append(args)) => match append(args) {
            Ok(summary) => {
                println!("{summary}");
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("recap events append: {error}");
                ExitCode::FAILURE
            }
        },
        Command::Serve(config) => {
            let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
                Ok(runtime) => runtime,
                Err(error) => {
                    eprintln!("recap serve: cannot start the runtime: {error}");
                    return ExitCode::FAILURE;
                }
            };
            match runtime.block_on(serve::run(config)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("recap serve: {error:#}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
