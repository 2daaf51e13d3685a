//! The command line of the `recap` binary: its subcommands and their flags, each with
//! its `RECAP_*` environment variable (clap), and `events append`, the one subcommand
//! that is not a long-running role. It lives in the library so that
//! `docs/configuration.md` is rendered from these very definitions (`make docs`).

use std::io::Read;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::{distributed, listen, serve, webhooks};

#[derive(Parser, Debug)]
#[command(name = "recap", version, about = "The read side of the meeting-notes service: REST API v1 and MCP server over a projected read model")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the embedded edition: projector, REST API and MCP server in one process over one data dir.
    Serve(serve::ServeConfig),
    /// Work with the event stream.
    #[command(subcommand)]
    Events(EventsCommand),
    /// Distributed edition: consume Kafka into ScyllaDB.
    Projector(distributed::ProjectorConfig),
    /// Distributed edition: create or upgrade the keyspace and tables (idempotent).
    Migrate(distributed::MigrateConfig),
    /// Distributed edition: the REST API over ScyllaDB, limits in Redis.
    #[command(name = "query-api")]
    QueryApi(distributed::QueryApiConfig),
    /// Distributed edition: the MCP server and its OAuth authorization server over ScyllaDB.
    Mcp(distributed::McpRoleConfig),
    /// Distributed edition: the account feeds and webhook deliveries, from the message topic.
    Webhooks(webhooks::WebhooksRoleConfig),
    /// Development: a webhook receiver that verifies each delivery (Standard Webhooks)
    /// with the endpoint's secret and prints its message.
    Listen(listen::ListenArgs),
}

impl Command {
    /// The role's name, as telemetry reports it (`recap.role`).
    pub fn role(&self) -> &'static str {
        match self {
            Command::Serve(_) => "serve",
            Command::Events(_) => "events",
            Command::Projector(_) => "projector",
            Command::Migrate(_) => "migrate",
            Command::QueryApi(_) => "query-api",
            Command::Mcp(_) => "mcp",
            Command::Webhooks(_) => "webhooks",
            Command::Listen(_) => "listen",
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum EventsCommand {
    /// Append contract events (JSON Lines, one envelope per line) to the embedded log.
    /// Reads standard input when no file is named. A file with a line that is not a JSON
    /// object is refused whole and nothing is appended.
    Append(AppendArgs),
}

#[derive(Args, Debug)]
pub struct AppendArgs {
    /// The data dir whose log receives the events.
    #[arg(long, env = "RECAP_DATA_DIR", default_value = "./recap-data")]
    data_dir: PathBuf,
    /// Publish to these Kafka brokers instead (distributed edition): each event goes to
    /// its contract topic, keyed by account_id, team_id or share_id.
    #[arg(long, value_name = "BROKERS")]
    kafka: Option<String>,
    /// With --kafka: publish every line to this topic instead of its contract topic.
    #[arg(long, requires = "kafka")]
    topic: Option<String>,
    /// With --kafka: prefix of the contract topics' names.
    #[arg(long, env = "RECAP_KAFKA_TOPIC_PREFIX", default_value = "")]
    topic_prefix: String,
    /// With --kafka: how to reach a secured cluster.
    #[command(flatten)]
    kafka_client: distributed::KafkaClientArgs,
    /// Files of JSON Lines; standard input when none.
    files: Vec<PathBuf>,
}

/// `recap events append`: validates every input, then appends it to the embedded log or
/// publishes it to Kafka; returns the line to print.
pub fn append(args: AppendArgs) -> Result<String, String> {
    if args.kafka.is_none() {
        std::fs::create_dir_all(&args.data_dir).map_err(|error| format!("cannot create data dir {}: {error}", args.data_dir.display()))?;
    }
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
    if let Some(brokers) = &args.kafka {
        let lines: Vec<Vec<u8>> = validated.split(|&byte| byte == b'\n').filter(|line| !line.is_empty()).map(<[u8]>::to_vec).collect();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|error| error.to_string())?;
        let client = args.kafka_client.client(brokers);
        let sent = runtime.block_on(distributed::produce(&client, lines, args.topic.as_deref(), &args.topic_prefix)).map_err(|error| format!("{error:#}"))?;
        return Ok(format!("published {sent} events to {brokers}"));
    }
    let bytes = log.append_validated(&validated).map_err(|error| error.to_string())?;
    Ok(format!("appended {events} events ({bytes} bytes) to {}", log.path().display()))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn every_role_has_a_consistent_command_line() {
        super::Cli::command().debug_assert();
    }
}
