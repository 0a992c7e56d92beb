//! Placeholder: the commit benchmark (see integration/bench/commit.sh).
fn main() {}
