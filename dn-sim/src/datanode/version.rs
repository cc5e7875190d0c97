//! Which Apache Ozone release dn-sim answers as (`--ozone-version`). Releases differ on the client
//! path in places (new command types, changed results); every such place asks this value, and
//! `docs/deviations.md` with the conformance suite (`conformance/`) lists them.

use std::fmt;
use std::str::FromStr;

/// An Ozone release line dn-sim can answer as.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum OzoneVersion {
    /// Ozone 2.0.x.
    V2_0,
    /// Ozone 2.1.x.
    V2_1,
    /// Ozone 2.2.x (the default).
    #[default]
    V2_2,
}

impl OzoneVersion {
    pub const ALL: [OzoneVersion; 3] = [Self::V2_0, Self::V2_1, Self::V2_2];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::V2_0 => "2.0",
            Self::V2_1 => "2.1",
            Self::V2_2 => "2.2",
        }
    }

    /// The full release a node of this version says it runs (to SCM, `ExtendedDatanodeDetails`).
    pub fn release(self) -> &'static str {
        match self {
            Self::V2_0 => "2.0.0",
            Self::V2_1 => "2.1.0",
            Self::V2_2 => "2.2.0",
        }
    }

    /// True from release `other` on.
    pub fn at_least(self, other: OzoneVersion) -> bool {
        self >= other
    }

    /// Whether this release's `Type` enum has the number `cmd_type`: 1–22 in 2.0,
    /// GetContainerChecksumInfo = 23 from 2.1, ReadBlock = 24 from 2.2. StreamInitWithPutBlock = 25
    /// is in no release. `cmdType` is a required enum, so any other number fails the parse.
    pub fn defines_cmd_type(self, cmd_type: i32) -> bool {
        let last = match self {
            Self::V2_0 => 22,
            Self::V2_1 => 23,
            Self::V2_2 => 24,
        };
        (1..=last).contains(&cmd_type)
    }

    /// The `Type` names this release's metrics list (one series each), in enum order.
    pub fn cmd_types(self) -> impl Iterator<Item = common::proto::Type> {
        (1..=25)
            .filter(move |&n| self.defines_cmd_type(n))
            .filter_map(|n| common::proto::Type::try_from(n).ok())
    }

    /// How the release's grpc-java closes a call whose request fails to parse:
    /// `ServerImpl.internalClose` gives UNKNOWN, with "Application error processing RPC" from
    /// grpc 1.60 on (Ozone 2.1.0, grpc 1.71; 2.2.0, grpc 1.75) and no description before (2.0.0,
    /// grpc 1.58). The parser's own text is never sent.
    pub fn parse_failure_status(self) -> tonic::Status {
        if self.at_least(Self::V2_1) {
            tonic::Status::unknown("Application error processing RPC")
        } else {
            tonic::Status::unknown("")
        }
    }
}

impl fmt::Display for OzoneVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for OzoneVersion {
    type Err = String;

    /// `2.0`, `2.1`, `2.2`, or a full release such as `2.2.0` (its patch level is ignored).
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let line = match t.match_indices('.').nth(1) {
            Some((i, _)) => &t[..i],
            None => t,
        };
        Self::ALL
            .into_iter()
            .find(|v| v.as_str() == line)
            .ok_or_else(|| format!("'{s}' is not an Ozone release dn-sim models (2.0, 2.1, 2.2)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_release_lines_and_full_releases() {
        assert_eq!("2.0".parse::<OzoneVersion>(), Ok(OzoneVersion::V2_0));
        assert_eq!("2.1.0".parse::<OzoneVersion>(), Ok(OzoneVersion::V2_1));
        assert_eq!(" 2.2.1 ".parse::<OzoneVersion>(), Ok(OzoneVersion::V2_2));
        assert!("1.4".parse::<OzoneVersion>().is_err());
        assert!("2.3".parse::<OzoneVersion>().is_err());
        assert!("2".parse::<OzoneVersion>().is_err());
        assert!(OzoneVersion::V2_2.at_least(OzoneVersion::V2_1));
        assert!(!OzoneVersion::V2_0.at_least(OzoneVersion::V2_1));
    }

    #[test]
    fn command_types_per_release() {
        use OzoneVersion::*;
        for v in OzoneVersion::ALL {
            assert!(v.defines_cmd_type(1) && v.defines_cmd_type(22), "{v}");
            assert!(!v.defines_cmd_type(0) && !v.defines_cmd_type(25) && !v.defines_cmd_type(99));
        }
        assert!(!V2_0.defines_cmd_type(23) && !V2_0.defines_cmd_type(24));
        assert!(V2_1.defines_cmd_type(23) && !V2_1.defines_cmd_type(24));
        assert!(V2_2.defines_cmd_type(23) && V2_2.defines_cmd_type(24));
        assert_eq!(V2_0.cmd_types().count(), 22);
        assert_eq!(V2_1.cmd_types().count(), 23);
        assert_eq!(V2_2.cmd_types().count(), 24);
    }

    #[test]
    fn parse_failures_are_unknown_with_the_release_s_description() {
        for (v, text) in [
            (OzoneVersion::V2_0, ""),
            (OzoneVersion::V2_1, "Application error processing RPC"),
            (OzoneVersion::V2_2, "Application error processing RPC"),
        ] {
            let status = v.parse_failure_status();
            assert_eq!(status.code(), tonic::Code::Unknown, "{v}");
            assert_eq!(status.message(), text, "{v}");
        }
    }
}
