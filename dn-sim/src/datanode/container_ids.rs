//! The `--containers` list: the containers dn-sim creates (OPEN) at start. The containers
//! themselves live in [`crate::datanode::store`].

use std::fmt;
use std::str::FromStr;

/// Container IDs as inclusive ranges, e.g. `1`, `1,2,7`, `1-100,200`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerIds {
    ranges: Vec<(i64, i64)>,
}

impl ContainerIds {
    pub fn single(id: i64) -> Self {
        Self {
            ranges: vec![(id, id)],
        }
    }

    pub fn contains(&self, id: i64) -> bool {
        self.ranges.iter().any(|&(lo, hi)| lo <= id && id <= hi)
    }

    /// Number of IDs in the set.
    pub fn len(&self) -> u64 {
        self.ranges
            .iter()
            .map(|&(lo, hi)| (hi - lo) as u64 + 1)
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = i64> + '_ {
        self.ranges.iter().flat_map(|&(lo, hi)| lo..=hi)
    }
}

impl FromStr for ContainerIds {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let err = || {
            format!(
                "'{s}' is not a container list (examples: 1; 1,2,7; 1-100,200; IDs are positive)"
            )
        };
        let mut ranges = Vec::new();
        if s.trim() == "none" {
            return Ok(Self { ranges });
        }
        for part in s.split(',').map(str::trim) {
            if part.is_empty() {
                continue;
            }
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (
                    a.trim().parse::<i64>().map_err(|_| err())?,
                    b.trim().parse::<i64>().map_err(|_| err())?,
                ),
                None => {
                    let v = part.parse::<i64>().map_err(|_| err())?;
                    (v, v)
                }
            };
            if lo < 1 || hi < lo {
                return Err(err());
            }
            ranges.push((lo, hi));
        }
        if ranges.is_empty() {
            return Err(err());
        }
        ranges.sort_unstable();
        Ok(Self { ranges })
    }
}

impl fmt::Display for ContainerIds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ranges.is_empty() {
            return f.write_str("none");
        }
        let parts: Vec<String> = self
            .ranges
            .iter()
            .map(|&(lo, hi)| {
                if lo == hi {
                    lo.to_string()
                } else {
                    format!("{lo}-{hi}")
                }
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_is_no_container() {
        let ids: ContainerIds = "none".parse().unwrap();
        assert!(ids.is_empty());
        assert_eq!(ids.iter().count(), 0);
        assert_eq!(ids.to_string(), "none");
    }

    #[test]
    fn parses_lists_and_ranges() {
        let ids: ContainerIds = "1,5-7, 10".parse().unwrap();
        assert!(ids.contains(1) && ids.contains(6) && ids.contains(10));
        assert!(!ids.contains(2) && !ids.contains(8) && !ids.contains(0));
        assert_eq!(ids.len(), 5);
        assert_eq!(ids.to_string(), "1,5-7,10");
        for bad in ["", "x", "0", "5-3", "-1", "1-", "1,,a"] {
            assert!(bad.parse::<ContainerIds>().is_err(), "{bad}");
        }
    }
}
