pub mod retry;
pub mod throttle;
