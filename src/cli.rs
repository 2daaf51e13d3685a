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
    /// Print the dead letters: the invalid events the projector set aside, each with its
    /// place in the stream and the reason, in the order they were set aside (from the data
    /// dir's `deadletter.jsonl`, or with --kafka from the dead-letter topic: each
    /// partition's in its order, a letter sent again printed once). Reading them changes
    /// nothing.
    #[command(name = "dead-letters")]
    DeadLetters(DeadLettersArgs),
}

#[derive(Args, Debug)]
pub struct DeadLettersArgs {
    /// The data dir whose dead letters are read.
    #[arg(long, env = "RECAP_DATA_DIR", default_value = "./recap-data")]
    data_dir: PathBuf,
    /// Read the dead-letter topic of these Kafka brokers instead (distributed edition),
    /// from the first letter it keeps to its end as it is now. No group is joined and
    /// nothing committed; the assignment still names one, `recap-dead-letters-reader`
    /// unless `--kafka-option group.id=NAME` names another (a cluster with ACLs may want
    /// it described).
    #[arg(long, value_name = "BROKERS")]
    kafka: Option<String>,
    /// With --kafka: the dead-letter topic, as the projector's --dead-letter-topic.
    #[arg(long, env = "RECAP_KAFKA_DEAD_LETTER_TOPIC", default_value = "recap.deadletter.v1")]
    dead_letter_topic: String,
    /// With --kafka: prefix of the topics' names, as the projector's.
    #[arg(long, env = "RECAP_KAFKA_TOPIC_PREFIX", default_value = "")]
    topic_prefix: String,
    /// With --kafka: how to reach a secured cluster.
    #[command(flatten)]
    kafka_client: distributed::KafkaClientArgs,
    /// What to print of each letter: `text` (its place, the event's id and the reason),
    /// `json` (the letter whole, one JSON object a line, as `deadletter.jsonl` holds it)
    /// or `raw` (the event's exact bytes, one a line: to correct and append again).
    #[arg(long, value_enum, default_value_t = LetterFormat::Text)]
    format: LetterFormat,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LetterFormat {
    Text,
    Json,
    Raw,
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

/// `recap events dead-letters`: prints the letters to `out` in the chosen format; returns
/// the summary for standard error (how many, and where from) and the warnings about
/// lines of the file that are not letters.
pub fn dead_letters(args: DeadLettersArgs, out: &mut impl std::io::Write) -> Result<(String, Vec<String>), String> {
    let (letters, source, warnings) = match &args.kafka {
        Some(brokers) => {
            let topic = format!("{}{}", args.topic_prefix, args.dead_letter_topic);
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|error| error.to_string())?;
            let client = args.kafka_client.client(brokers);
            let read = runtime.block_on(recap_projector::kafka::read_dead_letters(&client, &topic, std::time::Duration::from_secs(30)))?;
            let warnings = if read.is_none() { vec![format!("there is no topic {topic}: nothing was dead-lettered there")] } else { Vec::new() };
            (read.unwrap_or_default(), format!("{topic} at {brokers}"), warnings)
        }
        None => {
            let path = args.data_dir.join(serve::DEAD_LETTER_FILE);
            let read = recap_projector::read_dead_letters(&path).map_err(|error| format!("{}: {error}", path.display()))?;
            let (mut letters, mut warnings) = (Vec::new(), Vec::new());
            for letter in read {
                match letter {
                    Ok(letter) => letters.push(letter),
                    Err(unreadable) => warnings.push(format!("{}: {unreadable}", path.display())),
                }
            }
            (letters, path.display().to_string(), warnings)
        }
    };
    let written = (|| -> std::io::Result<()> {
        for letter in &letters {
            match args.format {
                LetterFormat::Text => {
                    // The event's own id, when the line is an envelope that has one.
                    let id = serde_json::from_slice::<serde_json::Value>(&letter.bytes())
                        .ok()
                        .and_then(|value| value.get("id").and_then(|id| id.as_str()).map(str::to_owned))
                        .unwrap_or_else(|| "-".into());
                    writeln!(out, "{}/{}@{}  {id}  {}", letter.topic, letter.partition, letter.offset, letter.reason)?;
                }
                LetterFormat::Json => {
                    serde_json::to_writer(&mut *out, letter)?;
                    out.write_all(b"\n")?;
                }
                LetterFormat::Raw => {
                    out.write_all(&letter.bytes())?;
                    out.write_all(b"\n")?;
                }
            }
        }
        out.flush()
    })();
    match written {
        // A reader that went away (`| head`) took what it wanted.
        Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => return Err(format!("writing: {error}")),
        _ => {}
    }
    let noun = if letters.len() == 1 { "dead letter" } else { "dead letters" };
    Ok((format!("{} {noun} in {source}", letters.len()), warnings))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn every_role_has_a_consistent_command_line() {
        super::Cli::command().debug_assert();
    }
}
