//! How a real agent learns why rwfs refused its write (issue 24): temporary names judged and
//! named as the file they stand for, the reason on the writer's stderr, the hook entry point
//! that reports every refusal to the agent that caused it, and the real harnesses (Claude Code,
//! Codex CLI, aider) driven by a scripted model endpoint, asserted on what the model read next.

mod harnesses;
mod hook;
mod stderr;
mod temporary;
