//! The `gopt` command line.

fn main() {}
