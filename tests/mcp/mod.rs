//! The MCP endpoint, in-process (rmcp client over `tokio::io::duplex`): every tool's success
//! path and its documented errors, one module per tool family, plus the serving modes; and
//! real external clients against the `rwfs` binary (`clients`), and the paper's benchmark
//! harness run by its scripted strategy (`rab`).

mod agent_rules;
mod checkpoint;
mod chunks;
mod clients;
mod handoff;
mod http_limits;
mod journal;
mod malformed;
mod rab;
mod read;
mod scratch;
mod serving;
mod validate;
mod write;
