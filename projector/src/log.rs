//! The embedded edition's event stream: one append-only file of JSON Lines in the data
//! dir, one envelope per line. Positions are byte offsets: a line's position is the
//! offset just past its newline, so "committed position" means "every line before it
//! is applied".
//!
//! Appends take an exclusive lock on the file and write the whole batch with one
//! `write_all` on an `O_APPEND` descriptor, so appends from several processes never
//! interleave within a line. A batch with any line that is not a JSON object is refused
//! whole, naming the line, before anything is written.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Why an append was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    #[error("{source_name}: line {line}: not a JSON object ({reason}); nothing was appended")]
    NotAnObject { source_name: String, line: usize, reason: String },
    #[error("event log {path}: {error}")]
    Io { path: PathBuf, error: std::io::Error },
}

/// One line read from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// Byte offset of the line's first byte.
    pub offset: u64,
    /// Byte offset just past the line's newline: the position once it is applied.
    pub end: u64,
    pub bytes: Vec<u8>,
}

#[derive(Debug, Clone)]
pub struct EventLog {
    path: PathBuf,
}

/// Checks that every non-blank line is a JSON object; returns the lines to append.
/// Blank lines carry nothing and are dropped.
pub fn validate_lines(source_name: &str, content: &[u8]) -> Result<Vec<u8>, AppendError> {
    let mut out = Vec::with_capacity(content.len() + 1);
    for (index, line) in content.split(|&byte| byte == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let refuse = |reason: String| AppendError::NotAnObject { source_name: source_name.to_string(), line: index + 1, reason };
        match serde_json::from_slice::<serde_json::Value>(line) {
            Ok(serde_json::Value::Object(_)) => {}
            Ok(other) => return Err(refuse(format!("found {}", json_kind(&other)))),
            Err(error) => return Err(refuse(error.to_string())),
        }
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    Ok(out)
}

fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

impl EventLog {
    pub fn new(path: impl Into<PathBuf>) -> EventLog {
        EventLog { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, error: std::io::Error) -> AppendError {
        AppendError::Io { path: self.path.clone(), error }
    }

    /// Appends already validated lines (see [`validate_lines`]) atomically with respect
    /// to other appenders. Returns the number of bytes appended.
    pub fn append_validated(&self, lines: &[u8]) -> Result<u64, AppendError> {
        if lines.is_empty() {
            return Ok(0);
        }
        let mut file = OpenOptions::new().create(true).append(true).read(true).open(&self.path).map_err(|error| self.io(error))?;
        file.lock().map_err(|error| self.io(error))?;
        let result = (|| {
            // An appender killed mid-write may have left a partial last line: end it, so
            // it stays one (dead-lettered) line instead of corrupting ours.
            let length = file.metadata()?.len();
            let mut batch = Vec::with_capacity(lines.len() + 1);
            if length > 0 {
                let mut last = [0u8; 1];
                file.seek(SeekFrom::Start(length - 1))?;
                file.read_exact(&mut last)?;
                if last[0] != b'\n' {
                    batch.push(b'\n');
                }
            }
            batch.extend_from_slice(lines);
            file.write_all(&batch)?;
            file.sync_data()?;
            Ok(batch.len() as u64)
        })();
        let _ = file.unlock();
        result.map_err(|error| self.io(error))
    }

    /// Validates and appends. Nothing is appended when any line is refused.
    pub fn append(&self, source_name: &str, content: &[u8]) -> Result<u64, AppendError> {
        let lines = validate_lines(source_name, content)?;
        self.append_validated(&lines)
    }

    /// The log's current length in bytes (0 when it does not exist yet).
    pub fn len(&self) -> std::io::Result<u64> {
        match std::fs::metadata(&self.path) {
            Ok(metadata) => Ok(metadata.len()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(0),
            Err(error) => Err(error),
        }
    }

    pub fn is_empty(&self) -> std::io::Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Complete lines from `position` on, at most `max_lines` and about `max_bytes`.
    /// A last line without its newline is still being written: it is left for later.
    pub fn read_from(&self, position: u64, max_lines: usize, max_bytes: usize) -> std::io::Result<Vec<LogLine>> {
        let mut file = match File::open(&self.path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(error),
        };
        let length = file.metadata()?.len();
        if length <= position {
            return Ok(Vec::new());
        }
        file.seek(SeekFrom::Start(position))?;
        let mut buffer = Vec::new();
        // Read at least one whole line even when it is larger than max_bytes.
        let mut want = max_bytes.max(64 * 1024) as u64;
        loop {
            buffer.clear();
            file.seek(SeekFrom::Start(position))?;
            (&mut file).take(want).read_to_end(&mut buffer)?;
            if buffer.contains(&b'\n') || position + buffer.len() as u64 >= length {
                break;
            }
            want *= 2;
        }
        let mut lines = Vec::new();
        let mut start = 0usize;
        while let Some(newline) = buffer[start..].iter().position(|&byte| byte == b'\n') {
            let end = start + newline;
            lines.push(LogLine { offset: position + start as u64, end: position + end as u64 + 1, bytes: buffer[start..end].to_vec() });
            start = end + 1;
            if lines.len() >= max_lines {
                break;
            }
        }
        Ok(lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_a_file_with_a_non_object_line_whole() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let log = EventLog::new(dir.path().join("events.log"));
        let error = log.append("events.jsonl", b"{\"a\":1}\n[1,2]\n{\"b\":2}\n").unwrap_err();
        assert!(error.to_string().contains("events.jsonl: line 2: not a JSON object (found an array)"), "{error}");
        assert_eq!(log.len().expect("the log file is readable"), 0, "nothing is appended");
        let error = log.append("x", b"{\"a\":1}\n{not json\n").unwrap_err();
        assert!(error.to_string().contains("line 2"), "{error}");
        assert_eq!(log.len().expect("the log file is readable"), 0);
    }

    #[test]
    fn appends_and_reads_whole_lines_with_positions() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let log = EventLog::new(dir.path().join("events.log"));
        log.append("a", b"{\"a\":1}\n\n{\"b\":2}").expect("the log file is writable");
        let lines = log.read_from(0, 10, 1 << 20).expect("the log file is readable");
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0], LogLine { offset: 0, end: 8, bytes: b"{\"a\":1}".to_vec() });
        assert_eq!(lines[1].offset, 8);
        assert_eq!(log.read_from(lines[1].end, 10, 1 << 20).expect("the log file is readable"), vec![]);
        assert_eq!(log.read_from(8, 10, 1 << 20).expect("the log file is readable")[0].bytes, b"{\"b\":2}".to_vec());
    }

    #[test]
    fn a_partial_last_line_is_left_and_then_terminated() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("events.log");
        std::fs::write(&path, b"{\"a\":1}\n{\"half").expect("the log file is writable");
        let log = EventLog::new(&path);
        assert_eq!(log.read_from(0, 10, 1 << 20).expect("the log file is readable").len(), 1, "the partial line is not read yet");
        log.append("b", b"{\"b\":2}\n").expect("the log file is writable");
        let lines = log.read_from(0, 10, 1 << 20).expect("the log file is readable");
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[1].bytes, b"{\"half".to_vec());
        assert_eq!(lines[2].bytes, b"{\"b\":2}".to_vec());
    }
}
