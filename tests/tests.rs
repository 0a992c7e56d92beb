//! The one integration test binary (DESIGN §10): every module drives rwfs through its public
//! API or the `rwfs` binary.

mod support;

mod commit;
mod crash;
mod concurrency;
mod model;
mod faults;
mod journal;

mod hostile_paths;
mod bad_state;
mod cli;
mod layout;
mod scan;
mod policy;
mod fuzz;
