//! How log lines are formatted (`json`) and written (`buffer`).

mod buffer;
mod json;

pub use buffer::{Flushed, Limits, LogBuffer, WRITE_EVERY};
pub use json::{JsonLines, Timestamps};
