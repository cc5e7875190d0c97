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

    /// True from release `other` on.
    pub fn at_least(self, other: OzoneVersion) -> bool {
        self >= other
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
}
