//! The left-hand side of `--delay TYPE=SPEC` and `--fault TYPE=KIND:PROBABILITY`: a command type
//! in snake case as Hadoop metrics spell it (`echo`, `write_chunk`, `get_committed_block_length`),
//! or `all`.

use common::proto::Type;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// Which requests a `--delay` or `--fault` entry applies to. An entry for a type overrides the
/// `all` entry for that type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CmdSelector {
    All,
    Type(Type),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error(
        "'{0}' is not a command type (use all or a type in snake case: echo, write_chunk, read_chunk, put_block, get_block, …)"
    )]
    Unknown(String),
    #[error("'{0}' is not TYPE=VALUE (e.g. write_chunk=2ms, all=IO_EXCEPTION:0.01)")]
    NoEquals(String),
    #[error("{target}: {reason}")]
    Value { target: String, reason: String },
}

/// Parses a command type: `write_chunk` (canonical), also the proto name `WriteChunk`.
pub fn parse_type(text: &str) -> Option<Type> {
    let t = text.trim();
    if let Some(ty) = Type::from_str_name(t) {
        return Some(ty);
    }
    let camel: String = t
        .split('_')
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => first.to_ascii_uppercase().to_string() + chars.as_str(),
                None => String::new(),
            }
        })
        .collect();
    // The round trip rejects spellings like `write__chunk` or `Write_Chunk`.
    Type::from_str_name(&camel).filter(|ty| ty.snake_name() == t)
}

impl FromStr for CmdSelector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim() == "all" {
            return Ok(CmdSelector::All);
        }
        parse_type(s)
            .map(CmdSelector::Type)
            .ok_or_else(|| SelectorError::Unknown(s.to_string()))
    }
}

impl fmt::Display for CmdSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CmdSelector::All => f.write_str("all"),
            CmdSelector::Type(ty) => f.write_str(&ty.snake_name()),
        }
    }
}

impl Serialize for CmdSelector {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for CmdSelector {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// One `TYPE=VALUE` command-line entry, e.g. `write_chunk=uniform:1ms..3ms`. Splits at the first
/// `=` (values may contain `=`). Usable directly as a clap value type:
/// `#[arg(long = "delay")] delay: Vec<Assignment<DelaySpec>>`.
#[derive(Debug, Clone, PartialEq)]
pub struct Assignment<T> {
    pub target: CmdSelector,
    pub value: T,
}

impl<T> FromStr for Assignment<T>
where
    T: FromStr,
    T::Err: fmt::Display,
{
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (target, value) = s
            .split_once('=')
            .ok_or_else(|| SelectorError::NoEquals(s.to_string()))?;
        let target: CmdSelector = target.parse()?;
        let value = value.parse().map_err(|e: T::Err| SelectorError::Value {
            target: target.to_string(),
            reason: e.to_string(),
        })?;
        Ok(Assignment { target, value })
    }
}

impl<T: fmt::Display> fmt::Display for Assignment<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.target, self.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_in_snake_case() {
        assert_eq!("all".parse(), Ok(CmdSelector::All));
        assert_eq!("echo".parse(), Ok(CmdSelector::Type(Type::Echo)));
        assert_eq!(
            "write_chunk".parse(),
            Ok(CmdSelector::Type(Type::WriteChunk))
        );
        assert_eq!(
            "WriteChunk".parse(),
            Ok(CmdSelector::Type(Type::WriteChunk))
        );
        assert_eq!(
            "get_committed_block_length".parse(),
            Ok(CmdSelector::Type(Type::GetCommittedBlockLength))
        );
        for bad in [
            "",
            "ALL",
            "write__chunk",
            "Write_Chunk",
            "writechunk",
            "nope",
            "_echo",
        ] {
            assert!(bad.parse::<CmdSelector>().is_err(), "{bad}");
        }
        assert_eq!(CmdSelector::Type(Type::ReadChunk).to_string(), "read_chunk");
    }

    #[test]
    fn assignment_splits_at_first_equals() {
        let a: Assignment<String> = "read_chunk=normal:mean=2ms,sd=1ms".parse().unwrap();
        assert_eq!(a.target, CmdSelector::Type(Type::ReadChunk));
        assert_eq!(a.value, "normal:mean=2ms,sd=1ms");
        assert_eq!(a.to_string(), "read_chunk=normal:mean=2ms,sd=1ms");
        assert!("read_chunk".parse::<Assignment<String>>().is_err());
        assert!("bogus=1ms".parse::<Assignment<String>>().is_err());
    }
}
