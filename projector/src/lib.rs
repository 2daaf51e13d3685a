//! The projector: event sources (the embedded log in the embedded edition, Kafka in the
//! distributed edition), the consume loop that applies them through the read model's projection,
//! positions committed after (embedded: with) the rows they cover, and dead letters.

pub mod embedded;
pub mod kafka;
pub mod log;

pub use embedded::{committed_progress, read_dead_letters, DeadLetter, EmbeddedProjector, LoopConfig, Progress, ProjectorError, Stats};
pub use log::{validate_lines, AppendError, EventLog};
