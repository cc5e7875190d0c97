//! Reports of a finished run.

pub mod freon;
mod time;

pub use time::format_dropwizard_datetime;
