//! Facade over the pipeline crates.
