//! The resilient-read companion (`rr_*`): bounded, resumable reads of workspace files —
//! `rr_stat`, `rr_read_bytes`, `rr_read_lines`, `rr_read_tail`, `rr_search_then_page`,
//! `rr_make_cursor`, `rr_read_next` — with the reference's inputs, outputs, defaults and caps
//! (docs/architecture.md, The reference) and rwfs's envelope v1 for every failure.
//!
//! Differences from the reference (its bugs fixed here):
//! - every path is resolved beneath the workspace root (`Workspace::open_file`), so `../`,
//!   absolute paths, outward symlinks and `.resilient_write/` are refused whatever the spelling —
//!   the reference read `../../../etc/hostname` through its unchecked relative fallback;
//! - cursors are signed: `<payload>.<mac>`, both base64url, the mac an HMAC-SHA256 of the
//!   payload under a per-workspace key (`.resilient_write/keys/cursor.key`, 32 random bytes,
//!   0600, created once, exclusively; the mount does not let processes read it). A forged or
//!   altered cursor is refused (`cursor_invalid`); a genuine one survives daemon restarts, and
//!   its path is resolved beneath the root again anyway;
//! - drift is size + mtime_ns + inode + ctime_ns, so a same-size rewrite within one mtime tick
//!   (or any replace by rename, which is how rwfs commits) is caught: `stale_precondition`,
//!   `context.reason: "file_changed"`, with the reference's `expected_*`/`actual_*` keys;
//! - `rr_read_bytes` never ends a UTF-8 window inside a character: it returns fewer bytes and
//!   `next_offset` points at the character's first byte (a window too small for even one
//!   character grows to hold it);
//! - `rr_read_lines` says `eof: true` when no line follows the returned ones, also when exactly
//!   `max_lines` remained;
//! - tail and search stream the file in blocks (memory is bounded whatever the file's size);
//!   search is a plain substring match per line, SIMD-accelerated (`memchr::memmem`, or
//!   Aho-Corasick for the case-insensitive form). Case folding is **ASCII only**, applied to the
//!   query as given and to its whole-lowercase and whole-uppercase forms, so `Ärger` also finds
//!   `ärger` and `ÄRGER`; the reference folded with Python's `lower()`, which also matches text
//!   whose non-ASCII letters mix cases differently (`ÄÖ` against `Äö`) — rwfs does not. A query
//!   cannot contain a newline (it is matched within one line).
//!
//! Limits of rwfs's own (the reference had none, and read whole files into memory): a line in
//! `rr_read_lines`, `rr_read_tail` and search excerpts shows at most [`LINE_CAP`] bytes
//! (`…[N more bytes]` marks the cut, `truncated_lines` counts them), and one answer holds at
//! most [`CONTENT_CAP`] of lines (read_lines then stops early with `eof: false`, tail drops its
//! oldest lines, search returns fewer matches with `has_more: true`). Lines are split on `\n`;
//! a `\r` before it is not shown.
//!
//! Nothing here writes except the cursor key, once per workspace.

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::durable::WorkspacePath;
use crate::engine::ReadView;
use crate::error::{Error, ErrorKind, Reason};
use crate::sha::{Hasher, Sha256};

use super::{Call, Failure, Outcome, Tools, ok};

/// `max_bytes` when not given.
pub const DEFAULT_MAX_BYTES: u64 = 65536;
/// The most lines one call returns (larger `max_lines` are capped).
pub const MAX_LINES_CAP: u64 = 5000;
/// The most matches one search returns (larger `max_matches` are capped).
pub const MAX_MATCHES_CAP: u64 = 100;
/// The most context lines on either side of a match.
pub const MAX_CONTEXT: u64 = 100;
/// The most bytes of one line shown in line-oriented answers.
pub const LINE_CAP: usize = 16 << 10;
/// The most bytes of lines in one answer.
pub const CONTENT_CAP: usize = 2 << 20;
/// The cursor key's name in the state directory.
pub const CURSOR_KEY: &str = "keys/cursor.key";

/// Read block for streaming passes.
const BLOCK: usize = 1 << 20;

fn default_max_bytes() -> u64 {
    DEFAULT_MAX_BYTES
}
fn default_encoding() -> String {
    "utf-8".into()
}
fn one() -> u64 {
    1
}
fn lines_400() -> u64 {
    400
}
fn lines_200() -> u64 {
    200
}
fn two() -> u64 {
    2
}
fn six() -> u64 {
    6
}
fn five() -> u64 {
    5
}

/// What to do with bytes the encoding cannot decode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Errors {
    /// U+FFFD for each undecodable sequence.
    #[default]
    Replace,
    /// Drop undecodable bytes.
    Ignore,
    /// Refuse the read (`policy_violation`, `context.reason: "decode_error"`).
    Strict,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatArgs {
    /// Workspace-relative path of the file.
    pub path: String,
    /// Also return the sha256 of the whole file (reads it).
    #[serde(default)]
    pub include_sha256: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadBytesArgs {
    /// Workspace-relative path of the file.
    pub path: String,
    /// Byte offset to start at (at most the file's size).
    #[serde(default)]
    pub offset: u64,
    /// Bytes to read, at least 1 (default 65536, capped by the policy's `read_cap_bytes`,
    /// default 65536). A UTF-8 window never ends inside a character, so fewer may come back;
    /// continue at `next_offset`.
    #[serde(default = "default_max_bytes")]
    pub max_bytes: u64,
    /// `utf-8` (default), `latin-1` or `ascii`.
    #[serde(default = "default_encoding")]
    pub encoding: String,
    /// `replace` (default), `ignore` or `strict`.
    #[serde(default)]
    pub errors: Errors,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadLinesArgs {
    /// Workspace-relative path of the file.
    pub path: String,
    /// First line to return, 1-based (default 1).
    #[serde(default = "one")]
    pub start_line: u64,
    /// Lines to return, 1 to 5000 (default 400).
    #[serde(default = "lines_400")]
    pub max_lines: u64,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadTailArgs {
    /// Workspace-relative path of the file.
    pub path: String,
    /// Lines to return from the end, 1 to 5000 (default 200).
    #[serde(default = "lines_200")]
    pub max_lines: u64,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// Workspace-relative path of the file.
    pub path: String,
    /// Plain text to find within a line (no regex, no newline).
    pub query: String,
    /// Line to start searching at, 1-based (default 1); pass `next_from_line` to page on.
    #[serde(default = "one")]
    pub from_line: u64,
    /// Lines shown before each match (default 2, at most 100).
    #[serde(default = "two")]
    pub context_before: u64,
    /// Lines shown after each match (default 6, at most 100).
    #[serde(default = "six")]
    pub context_after: u64,
    /// Matching lines to return, 1 to 100 (default 5).
    #[serde(default = "five")]
    pub max_matches: u64,
    /// Match case exactly (default false: ASCII case is folded).
    #[serde(default)]
    pub case_sensitive: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MakeCursorArgs {
    /// Workspace-relative path of the file.
    pub path: String,
    /// Byte offset the cursor starts at (default 0, at most the file's size).
    #[serde(default)]
    pub offset: u64,
    /// Bytes each `rr_read_next` returns (default 65536, capped by the policy's
    /// `read_cap_bytes`, default 65536).
    #[serde(default = "default_max_bytes")]
    pub max_bytes: u64,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadNextArgs {
    /// A cursor from `rr_make_cursor` or a previous `rr_read_next`.
    pub cursor: String,
    /// Bytes to read this time (and in the next cursor), instead of the cursor's.
    #[serde(default)]
    pub max_bytes: Option<u64>,
}

/// The file identity a cursor pins, and the position it stands at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CursorState {
    v: u32,
    path: String,
    offset: u64,
    max_bytes: u64,
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
    ino: u64,
}

/// A workspace file opened for reading, with the attributes of the opened descriptor.
struct Snapshot {
    path: WorkspacePath,
    file: File,
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
    ino: u64,
}

/// The decodings `rr_read_bytes` offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Utf8,
    Latin1,
    Ascii,
}

impl Encoding {
    fn parse(name: &str) -> Option<Encoding> {
        let name = name.trim().to_ascii_lowercase().replace('_', "-");
        match name.as_str() {
            "utf-8" | "utf8" => Some(Encoding::Utf8),
            "latin-1" | "latin1" | "iso-8859-1" | "iso8859-1" => Some(Encoding::Latin1),
            "ascii" | "us-ascii" => Some(Encoding::Ascii),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Encoding::Utf8 => "utf-8",
            Encoding::Latin1 => "latin-1",
            Encoding::Ascii => "ascii",
        }
    }
}

/// One window of bytes, decoded.
struct Window {
    offset: u64,
    bytes_read: u64,
    content: String,
}

impl Tools {
    pub fn rr_stat(&self, call: &Call, args: StatArgs) -> Outcome {
        let snap = self.snapshot(call, &args.path)?;
        let mut out = self.described(&snap, json!({"size": snap.size}));
        if args.include_sha256 {
            let sha = hash_all(&snap.file).map_err(|e| self.io_failure(call, &snap, "read file", e))?;
            out["sha256"] = json!(sha);
        }
        Ok(out)
    }

    /// The most bytes one byte read returns: the policy's `read_cap_bytes`.
    fn read_cap(&self) -> u64 {
        self.engine().policy().read_cap_bytes()
    }

    pub fn rr_read_bytes(&self, call: &Call, args: ReadBytesArgs) -> Outcome {
        let encoding = self.encoding(call, &args.encoding)?;
        let max = self.positive(call, "max_bytes", args.max_bytes)?.min(self.read_cap());
        let snap = self.snapshot(call, &args.path)?;
        let window = self.window(call, &snap, args.offset, max, encoding, args.errors)?;
        Ok(self.window_output(&snap, &window, encoding))
    }

    pub fn rr_read_lines(&self, call: &Call, args: ReadLinesArgs) -> Outcome {
        let start = self.positive(call, "start_line", args.start_line)?;
        let max = self.positive(call, "max_lines", args.max_lines)?.min(MAX_LINES_CAP);
        let snap = self.snapshot(call, &args.path)?;
        let read = read_lines(&snap.file, start, max).map_err(|e| self.io_failure(call, &snap, "read file", e))?;
        let returned = read.lines.len() as u64;
        Ok(self.described(
            &snap,
            json!({
                "start_line": start, "end_line": start + returned - 1,
                "lines_returned": returned, "eof": read.eof, "truncated_lines": read.truncated,
                "content": read.lines.join("\n"),
            }),
        ))
    }

    pub fn rr_read_tail(&self, call: &Call, args: ReadTailArgs) -> Outcome {
        let max = self.positive(call, "max_lines", args.max_lines)?.min(MAX_LINES_CAP);
        let snap = self.snapshot(call, &args.path)?;
        let tail = read_tail(&snap.file, snap.size, max).map_err(|e| self.io_failure(call, &snap, "read file", e))?;
        let returned = tail.lines.len() as u64;
        let start_line = tail.total - returned + 1;
        Ok(self.described(
            &snap,
            json!({
                "total_lines": tail.total, "start_line": start_line, "end_line": tail.total,
                "lines_returned": returned, "eof": true, "truncated_lines": tail.truncated,
                "content": tail.lines.join("\n"),
            }),
        ))
    }

    pub fn rr_search_then_page(&self, call: &Call, args: SearchArgs) -> Outcome {
        let from = self.positive(call, "from_line", args.from_line)?;
        let max = self.positive(call, "max_matches", args.max_matches)?.min(MAX_MATCHES_CAP);
        if args.query.is_empty() || args.query.contains('\n') {
            return Err(self.bad_argument(
                call,
                "query",
                "the query must be non-empty text within one line (no newline)",
                json!({"query": args.query}),
            ));
        }
        let (before, after) = (args.context_before.min(MAX_CONTEXT), args.context_after.min(MAX_CONTEXT));
        let snap = self.snapshot(call, &args.path)?;
        let needle = Needle::new(&args.query, args.case_sensitive);
        let found = search_then_page(&snap.file, &needle, from, max, before, after)
            .map_err(|e| self.io_failure(call, &snap, "read file", e))?;
        let next_from_line = found.matches.last().map_or(from, |m| m.match_line + 1);
        let matches: Vec<Value> = found
            .matches
            .iter()
            .map(|m| {
                json!({"match_line": m.match_line, "start_line": m.start_line, "end_line": m.end_line,
                       "excerpt": m.lines.join("\n")})
            })
            .collect();
        Ok(self.described(
            &snap,
            json!({
                "query": args.query, "from_line": from, "next_from_line": next_from_line,
                "matches_returned": matches.len(), "has_more": found.has_more, "matches": matches,
                "case_sensitive": args.case_sensitive, "truncated_lines": found.truncated,
            }),
        ))
    }

    pub fn rr_make_cursor(&self, call: &Call, args: MakeCursorArgs) -> Outcome {
        let max = self.positive(call, "max_bytes", args.max_bytes)?.min(self.read_cap());
        let snap = self.snapshot(call, &args.path)?;
        if args.offset > snap.size {
            return Err(self.beyond_end(call, &snap, args.offset));
        }
        let state = CursorState {
            v: 1,
            path: snap.path.to_string(),
            offset: args.offset,
            max_bytes: max,
            size: snap.size,
            mtime_ns: snap.mtime_ns,
            ctime_ns: snap.ctime_ns,
            ino: snap.ino,
        };
        let cursor = self.seal(call, &state)?;
        Ok(self.described(&snap, json!({"cursor": cursor, "offset": args.offset, "max_bytes": max, "size": snap.size})))
    }

    pub fn rr_read_next(&self, call: &Call, args: ReadNextArgs) -> Outcome {
        let state = self.open_cursor(call, &args.cursor)?;
        let max = match args.max_bytes {
            Some(max) => self.positive(call, "max_bytes", max)?.min(self.read_cap()),
            None => state.max_bytes.clamp(1, self.read_cap()),
        };
        let snap = self.snapshot(call, &state.path)?;
        let now = (snap.size, snap.mtime_ns, snap.ctime_ns, snap.ino);
        if (state.size, state.mtime_ns, state.ctime_ns, state.ino) != now {
            return Err(self.reject(
                call,
                ErrorKind::StalePrecondition,
                "file_changed",
                "the file changed since the cursor was made; make a new cursor (rr_make_cursor with this offset) to \
                 go on reading the new content",
                json!({
                    "path": snap.path.as_str(), "offset": state.offset,
                    "expected_size": state.size, "actual_size": snap.size,
                    "expected_mtime_ns": state.mtime_ns, "actual_mtime_ns": snap.mtime_ns,
                    "expected_ctime_ns": state.ctime_ns, "actual_ctime_ns": snap.ctime_ns,
                    "expected_inode": state.ino, "actual_inode": snap.ino,
                }),
                None,
            ));
        }
        let window = self.window(call, &snap, state.offset, max, Encoding::Utf8, Errors::Replace)?;
        let next = CursorState { offset: window.offset + window.bytes_read, max_bytes: max, ..state };
        let cursor = self.seal(call, &next)?;
        let mut out = self.window_output(&snap, &window, Encoding::Utf8);
        out["cursor"] = json!(cursor);
        Ok(out)
    }

    /// Open `input` beneath the root and take the descriptor's attributes. A file the policy's
    /// `read_guard:` keeps from the caller's agent run is refused, or read from its redacted
    /// view (same length, so sizes and cursors agree; `engine/read_guard.rs`).
    fn snapshot(&self, call: &Call, input: &str) -> Result<Snapshot, Failure> {
        let opened = self.engine().workspace().open_file(input).map_err(|e| self.fail(call, e, None))?;
        let meta = opened
            .file
            .metadata()
            .map_err(|e| self.fail(call, Error::io("stat file", e).at(opened.path.as_str()), None))?;
        let file = self.guarded(call, opened.path.as_str(), opened.file).map_err(|e| self.fail(call, e, None))?;
        Ok(Snapshot {
            path: opened.path,
            file,
            size: meta.size(),
            mtime_ns: meta.mtime().saturating_mul(1_000_000_000).saturating_add(meta.mtime_nsec()),
            ctime_ns: meta.ctime().saturating_mul(1_000_000_000).saturating_add(meta.ctime_nsec()),
            ino: meta.ino(),
        })
    }

    /// `file` (of `path`) as the caller may read it: itself, or its redacted view in memory.
    fn guarded(&self, call: &Call, path: &str, file: File) -> crate::error::Result<File> {
        let Some(pid) = call.actor.pid else { return Ok(file) };
        match self.engine().read_view(path, pid, call.actor.comm.as_deref()) {
            ReadView::Real => Ok(file),
            ReadView::Refused { rule } => Err(Error::from(Reason::ReadGuarded { rule, redacted: false }).at(path)),
            ReadView::Redacted { rule } => {
                let view = crate::store::in_memory(&self.engine().redacted_view(path, &rule)?, 0o400)?;
                Ok(File::from(view.into_fd()))
            }
        }
    }

    /// `{ok, path, abs_path, mtime_ns, ...fields}`.
    fn described(&self, snap: &Snapshot, fields: Value) -> Value {
        let mut out = ok(fields);
        let abs = self.engine().workspace().path().join(snap.path.as_str());
        out["path"] = json!(snap.path.as_str());
        out["abs_path"] = json!(abs.display().to_string());
        out["mtime_ns"] = json!(snap.mtime_ns);
        out
    }

    /// Read and decode `max` bytes at `offset`, never ending inside a UTF-8 character.
    fn window(
        &self,
        call: &Call,
        snap: &Snapshot,
        offset: u64,
        max: u64,
        encoding: Encoding,
        errors: Errors,
    ) -> Result<Window, Failure> {
        if offset > snap.size {
            return Err(self.beyond_end(call, snap, offset));
        }
        // Three bytes past the window show whether its last character is complete.
        let mut buf = vec![0u8; max as usize + 3];
        let got = read_full(&snap.file, &mut buf, offset).map_err(|e| self.io_failure(call, snap, "read file", e))?;
        buf.truncate(got);
        let take = match encoding {
            Encoding::Utf8 => utf8_window(&buf, max as usize),
            _ => buf.len().min(max as usize),
        };
        buf.truncate(take);
        let content = decode(&buf, encoding, errors).map_err(|at| {
            self.reject(
                call,
                ErrorKind::PolicyViolation,
                "decode_error",
                format!("byte {} is not valid {}", offset + at as u64, encoding.as_str()),
                json!({"path": snap.path.as_str(), "offset": offset + at as u64, "encoding": encoding.as_str(),
                       "hint": "read with errors=replace or errors=ignore"}),
                None,
            )
        })?;
        Ok(Window { offset, bytes_read: take as u64, content })
    }

    fn window_output(&self, snap: &Snapshot, w: &Window, encoding: Encoding) -> Value {
        let next = w.offset + w.bytes_read;
        let mut out = self.described(
            snap,
            json!({
                "offset": w.offset, "bytes_read": w.bytes_read, "next_offset": next, "eof": next >= snap.size,
                "size": snap.size, "encoding": encoding.as_str(), "content": w.content,
            }),
        );
        out["ctime_ns"] = json!(snap.ctime_ns);
        out
    }

    fn encoding(&self, call: &Call, name: &str) -> Result<Encoding, Failure> {
        Encoding::parse(name).ok_or_else(|| {
            self.bad_argument(call, "encoding", "encoding is utf-8, latin-1 or ascii", json!({"encoding": name}))
        })
    }

    /// `value` must be at least 1.
    fn positive(&self, call: &Call, argument: &str, value: u64) -> Result<u64, Failure> {
        if value == 0 {
            return Err(self.bad_argument(
                call,
                argument,
                format!("{argument} must be at least 1"),
                json!({"value": 0}),
            ));
        }
        Ok(value)
    }

    fn beyond_end(&self, call: &Call, snap: &Snapshot, offset: u64) -> Failure {
        self.bad_argument(
            call,
            "offset",
            format!("offset {offset} is beyond the end of the file ({} bytes)", snap.size),
            json!({"path": snap.path.as_str(), "offset": offset, "size": snap.size}),
        )
    }

    fn io_failure(&self, call: &Call, snap: &Snapshot, step: &'static str, e: io::Error) -> Failure {
        self.fail(call, Error::io(step, e).at(snap.path.as_str()), None)
    }

    /// The workspace's cursor key: read it, or create it once (exclusively; a concurrent
    /// creator wins and its key is read back).
    fn cursor_key(&self, call: &Call) -> Result<Vec<u8>, Failure> {
        let engine = self.engine();
        let read = |engine: &crate::engine::Engine| {
            engine.workspace().state_read(CURSOR_KEY).map_err(|e| self.fail(call, e, None))
        };
        let key = match read(engine)? {
            Some(key) => key,
            None => {
                let mut key = [0u8; 32];
                getrandom::fill(&mut key).map_err(|e| {
                    self.fail(call, Error::io("generate cursor key", io::Error::other(e.to_string())), None)
                })?;
                match engine.state().write(CURSOR_KEY, &key, true, true, &call.actor) {
                    Ok(_) => key.to_vec(),
                    Err(e) if matches!(e.reason(), Reason::AlreadyExists { .. }) => read(engine)?
                        .ok_or_else(|| self.fail(call, Error::from(Reason::NotFound).at(CURSOR_KEY), None))?,
                    Err(e) => return Err(self.fail(call, e, None)),
                }
            }
        };
        if key.len() < 32 {
            let error = Error::from(Reason::InvalidArgument { what: "cursor key (shorter than 32 bytes)" });
            return Err(self.fail(call, error.at(format!(".resilient_write/{CURSOR_KEY}")), None));
        }
        Ok(key)
    }

    /// The signed token of `state`.
    fn seal(&self, call: &Call, state: &CursorState) -> Result<String, Failure> {
        let key = self.cursor_key(call)?;
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(state).expect("cursor serializes"));
        let mac = URL_SAFE_NO_PAD.encode(cursor_mac(&key, &payload));
        Ok(format!("{payload}.{mac}"))
    }

    /// The state of a token this workspace signed; anything else is `cursor_invalid`.
    fn open_cursor(&self, call: &Call, token: &str) -> Result<CursorState, Failure> {
        let refuse = |why: &str| {
            let mut failure = self.reject(
                call,
                ErrorKind::PolicyViolation,
                "cursor_invalid",
                format!("not a cursor this workspace issued ({why}); make one with rr_make_cursor"),
                json!({}),
                None,
            );
            failure.0.reason_hint = "encoding".into();
            failure
        };
        let (payload, mac) = token.trim().split_once('.').ok_or_else(|| refuse("malformed"))?;
        let mac = URL_SAFE_NO_PAD.decode(mac).map_err(|_| refuse("malformed signature"))?;
        let key = self.cursor_key(call)?;
        if !crate::sha::same_secret(&cursor_mac(&key, payload), &mac) {
            return Err(refuse("bad signature"));
        }
        let bytes = URL_SAFE_NO_PAD.decode(payload).map_err(|_| refuse("malformed payload"))?;
        let state: CursorState = serde_json::from_slice(&bytes).map_err(|_| refuse("malformed payload"))?;
        if state.v != 1 {
            return Err(refuse("unknown version"));
        }
        Ok(state)
    }
}

/// HMAC-SHA256 of the cursor payload (RFC 2104), domain-separated from any other use of the key.
fn cursor_mac(key: &[u8], payload: &str) -> [u8; 32] {
    let mut message = Vec::with_capacity(payload.len() + 10);
    message.extend_from_slice(b"rr_cursor\0");
    message.extend_from_slice(payload.as_bytes());
    crate::sha::hmac_sha256(key, &message)
}

/// Fill `buf` from `offset` until it is full or the file ends; the bytes read.
fn read_full(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

fn hash_all(file: &File) -> io::Result<Sha256> {
    let mut hasher = Hasher::new();
    let mut buf = vec![0u8; BLOCK];
    let mut at = 0u64;
    loop {
        let n = read_full(file, &mut buf, at)?;
        if n == 0 {
            return Ok(hasher.finish());
        }
        hasher.update(&buf[..n]);
        at += n as u64;
    }
}

/// How many of `buf`'s bytes a window of `max` returns: `max`, less an incomplete UTF-8
/// character at its end; if that leaves nothing, the whole first character (`buf` holds up to
/// three bytes past the window to see it).
fn utf8_window(buf: &[u8], max: usize) -> usize {
    if buf.len() <= max {
        // The file ends inside the window: nothing follows to complete a character.
        return buf.len();
    }
    let cut = utf8_cut(&buf[..max], &buf[max..]);
    if cut > 0 {
        return cut;
    }
    sequence_len(buf[0]).clamp(1, buf.len())
}

/// The length of `window` without a trailing character that continues in `rest`.
fn utf8_cut(window: &[u8], rest: &[u8]) -> usize {
    let n = window.len();
    for back in 1..=n.min(3) {
        let b = window[n - back];
        if b & 0xC0 == 0x80 {
            continue;
        }
        let need = sequence_len(b);
        // Complete only if the bytes after the lead are continuations, inside the window.
        let continues = rest.first().is_some_and(|c| c & 0xC0 == 0x80);
        return if need > back && continues { n - back } else { n };
    }
    n
}

/// The length a UTF-8 sequence starting with `lead` claims (1 for ASCII and invalid leads).
fn sequence_len(lead: u8) -> usize {
    match lead {
        0xC2..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF4 => 4,
        _ => 1,
    }
}

/// Decode `bytes`; `Err(position)` of the first undecodable byte under `Errors::Strict`.
fn decode(bytes: &[u8], encoding: Encoding, errors: Errors) -> Result<String, usize> {
    match (encoding, errors) {
        (Encoding::Utf8, Errors::Replace) => Ok(String::from_utf8_lossy(bytes).into_owned()),
        (Encoding::Utf8, Errors::Strict) => std::str::from_utf8(bytes).map(str::to_owned).map_err(|e| e.valid_up_to()),
        (Encoding::Utf8, Errors::Ignore) => Ok(bytes.utf8_chunks().map(|c| c.valid()).collect()),
        (Encoding::Latin1, _) => Ok(bytes.iter().map(|&b| b as char).collect()),
        (Encoding::Ascii, errors) => {
            let mut out = String::with_capacity(bytes.len());
            for (i, &b) in bytes.iter().enumerate() {
                match (b.is_ascii(), errors) {
                    (true, _) => out.push(b as char),
                    (false, Errors::Strict) => return Err(i),
                    (false, Errors::Replace) => out.push('\u{FFFD}'),
                    (false, Errors::Ignore) => {}
                }
            }
            Ok(out)
        }
    }
}

/// Reads lines forward from an offset, keeping at most a bounded prefix of each.
struct LineReader<'a> {
    file: &'a File,
    /// File offset of `buf[start]`.
    pos: u64,
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl<'a> LineReader<'a> {
    fn new(file: &'a File, pos: u64) -> LineReader<'a> {
        LineReader { file, pos, buf: vec![0; 256 << 10], start: 0, end: 0 }
    }

    /// Make bytes available; false at the end of the file.
    fn fill(&mut self) -> io::Result<bool> {
        if self.start < self.end {
            return Ok(true);
        }
        let n = loop {
            match self.file.read_at(&mut self.buf, self.pos) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other?,
            }
        };
        self.start = 0;
        self.end = n;
        Ok(n > 0)
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
        self.pos += n as u64;
    }

    /// The next line into `out` (at most `keep` bytes of it, without its `\n`): the line's
    /// full length, or `None` at the end of the file.
    fn next_line(&mut self, keep: usize, out: &mut Vec<u8>) -> io::Result<Option<u64>> {
        out.clear();
        let mut len = 0u64;
        loop {
            if !self.fill()? {
                return Ok((len > 0).then_some(len));
            }
            let avail = &self.buf[self.start..self.end];
            let (part, done) = match memchr::memchr(b'\n', avail) {
                Some(i) => (&avail[..i], true),
                None => (avail, false),
            };
            let room = keep.saturating_sub(out.len());
            out.extend_from_slice(&part[..part.len().min(room)]);
            len += part.len() as u64;
            let used = part.len() + done as usize;
            self.consume(used);
            if done {
                return Ok(Some(len));
            }
        }
    }

    fn at_end(&mut self) -> io::Result<bool> {
        Ok(!self.fill()?)
    }
}

/// `N|line` for display, cut at [`LINE_CAP`]; true when cut.
fn render(number: u64, kept: &[u8], len: u64) -> (String, bool) {
    let cut = len as usize > LINE_CAP;
    let shown = if cut {
        let end = kept.len().min(LINE_CAP);
        utf8_cut(&kept[..end], &kept[end..])
    } else {
        kept.len() - kept.ends_with(b"\r") as usize
    };
    let text = String::from_utf8_lossy(&kept[..shown]);
    if cut {
        (format!("{number}|{text}…[{} more bytes]", len - shown as u64), true)
    } else {
        (format!("{number}|{text}"), false)
    }
}

/// Lines read for an answer.
struct Lines {
    lines: Vec<String>,
    /// Lines shown cut at [`LINE_CAP`].
    truncated: u64,
    eof: bool,
}

/// Lines `start..` (at most `max`, within [`CONTENT_CAP`]).
fn read_lines(file: &File, start: u64, max: u64) -> io::Result<Lines> {
    let mut out = Lines { lines: Vec::new(), truncated: 0, eof: true };
    let Some(offset) = seek_line(file, start)? else {
        return Ok(out);
    };
    let mut reader = LineReader::new(file, offset);
    let mut kept = Vec::new();
    let mut total = 0usize;
    while (out.lines.len() as u64) < max {
        let Some(len) = reader.next_line(LINE_CAP + 4, &mut kept)? else {
            return Ok(out);
        };
        let (line, cut) = render(start + out.lines.len() as u64, &kept, len);
        if !out.lines.is_empty() && total + line.len() + 1 > CONTENT_CAP {
            // This line is not returned: the next call starts at it.
            out.eof = false;
            return Ok(out);
        }
        total += line.len() + 1;
        out.truncated += cut as u64;
        out.lines.push(line);
    }
    out.eof = reader.at_end()?;
    Ok(out)
}

/// The offset where 1-based `line` starts; `None` when the file has fewer lines before it.
fn seek_line(file: &File, line: u64) -> io::Result<Option<u64>> {
    let mut need = line - 1;
    if need == 0 {
        return Ok(Some(0));
    }
    let mut buf = vec![0u8; BLOCK];
    let mut at = 0u64;
    loop {
        let n = read_full(file, &mut buf, at)?;
        if n == 0 {
            return Ok(None);
        }
        let block = &buf[..n];
        let count = memchr::memchr_iter(b'\n', block).count() as u64;
        if count >= need {
            let nl = memchr::memchr_iter(b'\n', block).nth(need as usize - 1).expect("counted");
            return Ok(Some(at + nl as u64 + 1));
        }
        need -= count;
        at += n as u64;
    }
}

/// The number of lines: newlines, plus an unterminated last line.
fn count_lines(file: &File) -> io::Result<u64> {
    let mut buf = vec![0u8; BLOCK];
    let (mut at, mut lines, mut last) = (0u64, 0u64, b'\n');
    loop {
        let n = read_full(file, &mut buf, at)?;
        if n == 0 {
            break;
        }
        lines += memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
        last = buf[n - 1];
        at += n as u64;
    }
    Ok(lines + (last != b'\n') as u64)
}

/// Walk back up to `k` lines from `pos` (a line start, or the end of the file): the offset of
/// the line reached and how many lines were walked.
fn line_start_before(file: &File, pos: u64, k: u64) -> io::Result<(u64, u64)> {
    const BACK: usize = 64 << 10;
    let mut buf = vec![0u8; BACK];
    let (mut pos, mut moved) = (pos, 0u64);
    // `scan_end`: bytes before it are not yet searched; the byte at pos-1 ends the line before
    // `pos` (or the file's last line), so it is skipped.
    let mut scan_end = pos.saturating_sub(1);
    while moved < k && pos > 0 {
        if scan_end == 0 {
            pos = 0;
            moved += 1;
            break;
        }
        let from = scan_end.saturating_sub(BACK as u64);
        let len = (scan_end - from) as usize;
        let n = read_full(file, &mut buf[..len], from)?;
        let mut block = &buf[..n];
        loop {
            match memchr::memrchr(b'\n', block) {
                Some(i) if moved < k => {
                    pos = from + i as u64 + 1;
                    moved += 1;
                    block = &block[..i];
                }
                _ => break,
            }
        }
        if moved == k {
            break;
        }
        scan_end = from;
    }
    Ok((pos, moved))
}

/// The last lines of a file.
struct Tail {
    lines: Vec<String>,
    total: u64,
    truncated: u64,
}

/// The last `max` lines (the oldest dropped to stay within [`CONTENT_CAP`]).
fn read_tail(file: &File, size: u64, max: u64) -> io::Result<Tail> {
    let total = count_lines(file)?;
    let (start, moved) = line_start_before(file, size, max)?;
    let first = total - moved + 1;
    let mut reader = LineReader::new(file, start);
    let mut kept = Vec::new();
    let mut lines = std::collections::VecDeque::new();
    let mut bytes = 0usize;
    for number in first..=total {
        let Some(len) = reader.next_line(LINE_CAP + 4, &mut kept)? else {
            break;
        };
        let (line, cut) = render(number, &kept, len);
        bytes += line.len() + 1;
        lines.push_back((line, cut));
        while bytes > CONTENT_CAP && lines.len() > 1 {
            let (dropped, _) = lines.pop_front().expect("not empty");
            bytes -= dropped.len() + 1;
        }
    }
    let truncated = lines.iter().filter(|(_, cut)| *cut).count() as u64;
    Ok(Tail { lines: lines.into_iter().map(|(l, _)| l).collect(), total, truncated })
}

/// A compiled query.
pub(crate) struct Needle {
    finder: Finder,
    /// The longest pattern's length, less one: bytes kept across blocks.
    overlap: usize,
}

enum Finder {
    Exact(Box<memchr::memmem::Finder<'static>>),
    Folded(aho_corasick::AhoCorasick),
}

impl Needle {
    /// `query` as given, or ASCII-case-folded (with its whole-lowercase and whole-uppercase
    /// forms, so all-lower and all-upper non-ASCII text matches too).
    pub(crate) fn new(query: &str, case_sensitive: bool) -> Needle {
        if case_sensitive || (query.is_ascii() && !query.bytes().any(|b| b.is_ascii_alphabetic())) {
            let finder = memchr::memmem::Finder::new(query.as_bytes()).into_owned();
            return Needle { finder: Finder::Exact(Box::new(finder)), overlap: query.len() - 1 };
        }
        // Case forms that change the length (`ß` → `SS`) would match what folding each
        // character does not.
        let chars = query.chars().count();
        let mut patterns = vec![query.to_string(), query.to_lowercase(), query.to_uppercase()];
        patterns.retain(|p| p.chars().count() == chars);
        patterns.sort();
        patterns.dedup();
        let overlap = patterns.iter().map(String::len).max().unwrap_or(1) - 1;
        let ac = aho_corasick::AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .match_kind(aho_corasick::MatchKind::LeftmostFirst)
            .build(&patterns)
            .expect("plain literals always build");
        Needle { finder: Finder::Folded(ac), overlap }
    }

    /// The start of the first match at or after `from`, wholly inside `hay`.
    fn find(&self, hay: &[u8], from: usize) -> Option<usize> {
        match &self.finder {
            Finder::Exact(f) => f.find(&hay[from..]).map(|i| from + i),
            Finder::Folded(ac) => ac.find(aho_corasick::Input::new(hay).range(from..)).map(|m| m.start()),
        }
    }
}

/// A matching line, where it starts, and its excerpt.
struct Match {
    match_line: u64,
    start_line: u64,
    end_line: u64,
    lines: Vec<String>,
}

struct Found {
    matches: Vec<Match>,
    has_more: bool,
    truncated: u64,
}

/// Up to `max` matching lines from `from_line` with their excerpts.
fn search_then_page(
    file: &File,
    needle: &Needle,
    from_line: u64,
    max: u64,
    before: u64,
    after: u64,
) -> io::Result<Found> {
    let mut found = Found { matches: Vec::new(), has_more: false, truncated: 0 };
    let Some(offset) = seek_line(file, from_line)? else {
        return Ok(found);
    };
    let hits = matching_lines(file, needle, from_line, offset, max as usize + 1)?;
    found.has_more = hits.len() as u64 > max;
    let mut total = 0usize;
    let mut kept = Vec::new();
    for &(line, line_start) in hits.iter().take(max as usize) {
        let (start, moved) = line_start_before(file, line_start, before)?;
        let mut reader = LineReader::new(file, start);
        let mut m = Match { match_line: line, start_line: line - moved, end_line: line - moved, lines: Vec::new() };
        let mut cuts = 0;
        for number in m.start_line..=line + after {
            let Some(len) = reader.next_line(LINE_CAP + 4, &mut kept)? else {
                break;
            };
            let (text, cut) = render(number, &kept, len);
            total += text.len() + 1;
            cuts += cut as u64;
            m.lines.push(text);
            m.end_line = number;
        }
        if !found.matches.is_empty() && total > CONTENT_CAP {
            found.has_more = true;
            break;
        }
        found.truncated += cuts;
        found.matches.push(m);
    }
    Ok(found)
}

/// The first `want` lines at or after `line` (which starts at `offset`) holding a match: each
/// line's number and start offset. Streams the file in blocks.
fn matching_lines(file: &File, needle: &Needle, line: u64, offset: u64, want: usize) -> io::Result<Vec<(u64, u64)>> {
    let mut out = Vec::new();
    let mut buf: Vec<u8> = Vec::with_capacity(BLOCK + needle.overlap);
    let mut buf_start = offset; // file offset of buf[0]
    let mut read_at = offset;
    let (mut line, mut line_start) = (line, offset);
    let mut counted = offset; // newlines before this offset are counted in `line`
    let mut search = offset; // no match starts before this offset that is not handled
    let mut skipping = false; // the current line already matched: go to its end
    // Count the newlines of buf[counted..to] into `line`.
    let count = |buf: &[u8], buf_start: u64, counted: &mut u64, to: u64, line: &mut u64, line_start: &mut u64| {
        if to <= *counted {
            return;
        }
        let seg = &buf[(*counted - buf_start) as usize..(to - buf_start) as usize];
        let k = memchr::memchr_iter(b'\n', seg).count() as u64;
        if k > 0 {
            *line += k;
            *line_start = *counted + memchr::memrchr(b'\n', seg).expect("counted") as u64 + 1;
        }
        *counted = to;
    };
    loop {
        let keep_from = search.min(counted);
        buf.drain(..(keep_from - buf_start) as usize);
        buf_start = keep_from;
        let old = buf.len();
        buf.resize(old + BLOCK, 0);
        let n = read_full(file, &mut buf[old..], read_at)?;
        buf.truncate(old + n);
        read_at += n as u64;
        let at_end = n == 0;
        let end = buf_start + buf.len() as u64;
        loop {
            if skipping {
                let from = (counted - buf_start) as usize;
                match memchr::memchr(b'\n', &buf[from..]) {
                    Some(i) => {
                        let nl = counted + i as u64;
                        line += 1;
                        line_start = nl + 1;
                        counted = nl + 1;
                        search = search.max(nl + 1);
                        skipping = false;
                    }
                    None => {
                        counted = end;
                        search = end;
                        break;
                    }
                }
            }
            match needle.find(&buf, (search - buf_start) as usize) {
                Some(i) => {
                    let at = buf_start + i as u64;
                    // A match that started in the kept overlap has no newline before `counted`.
                    count(&buf, buf_start, &mut counted, at, &mut line, &mut line_start);
                    out.push((line, line_start));
                    if out.len() == want {
                        return Ok(out);
                    }
                    skipping = true;
                }
                None => {
                    count(&buf, buf_start, &mut counted, end, &mut line, &mut line_start);
                    search = if at_end { end } else { search.max(end.saturating_sub(needle.overlap as u64)) };
                    break;
                }
            }
        }
        if at_end {
            return Ok(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_of(bytes: &[u8]) -> File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        f
    }

    #[test]
    fn utf8_windows_end_on_character_boundaries() {
        let text = "aé€😀b".as_bytes(); // 1 + 2 + 3 + 4 + 1 bytes
        let mut offset = 0;
        for max in 1..=text.len() {
            let mut pieces = Vec::new();
            offset = 0;
            while offset < text.len() {
                let window = &text[offset..(offset + max + 3).min(text.len())];
                let take = utf8_window(window, max);
                assert!(take > 0);
                pieces.push(std::str::from_utf8(&text[offset..offset + take]).expect("whole characters").to_string());
                offset += take;
            }
            assert_eq!(pieces.concat(), "aé€😀b", "max {max}");
        }
        assert_eq!(offset, text.len());
        // Invalid bytes are not held back forever.
        assert_eq!(utf8_window(&[b'a', 0xE2, b'b', b'c'], 2), 2);
    }

    #[test]
    fn lines_report_eof_when_exactly_the_cap_remains() {
        let f = file_of(b"1\n2\n3\n4\n");
        let read = read_lines(&f, 3, 2).unwrap();
        assert_eq!(read.lines, ["3|3", "4|4"]);
        assert!(read.eof, "reference bug: eof false when exactly max_lines remain");
        let read = read_lines(&f, 2, 2).unwrap();
        assert!(!read.eof);
        let read = read_lines(&f, 9, 2).unwrap();
        assert!(read.lines.is_empty() && read.eof);
        let f = file_of(b"a\r\nb");
        assert_eq!(read_lines(&f, 1, 10).unwrap().lines, ["1|a", "2|b"]);
    }

    #[test]
    fn tail_counts_lines_with_and_without_a_final_newline() {
        for (text, total, last) in [(&b"a\nb\nc\n"[..], 3, vec!["2|b", "3|c"]), (b"a\nb\nc", 3, vec!["2|b", "3|c"])] {
            let f = file_of(text);
            let tail = read_tail(&f, text.len() as u64, 2).unwrap();
            assert_eq!(tail.total, total);
            assert_eq!(tail.lines, last);
        }
        let f = file_of(b"only");
        assert_eq!(read_tail(&f, 4, 10).unwrap().lines, ["1|only"]);
        let f = file_of(b"");
        let tail = read_tail(&f, 0, 10).unwrap();
        assert_eq!((tail.total, tail.lines.len()), (0, 0));
    }

    #[test]
    fn search_then_page_counts_matches_in_a_generated_log() {
        let mut log = String::new();
        let mut expected = Vec::new();
        for i in 1..=10_000u64 {
            if i % 7 == 0 {
                log.push_str(&format!("2026-01-01 ERROR worker {i} failed\n"));
                expected.push(i);
            } else if i % 11 == 0 {
                log.push_str(&format!("2026-01-01 info: error budget ok at {i}\n"));
                expected.push(i);
            } else {
                log.push_str(&format!("2026-01-01 INFO worker {i} fine\n"));
            }
        }
        let f = file_of(log.as_bytes());
        let needle = Needle::new("error", false);
        let hits = matching_lines(&f, &needle, 1, 0, usize::MAX).unwrap();
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), expected);
        // Each hit's offset is its line's start.
        let lines: Vec<&str> = log.lines().collect();
        for &(line, start) in hits.iter().take(50) {
            assert!(log[start as usize..].starts_with(lines[line as usize - 1]));
        }
        let exact = matching_lines(&f, &Needle::new("ERROR", true), 1, 0, usize::MAX).unwrap();
        assert_eq!(exact.len(), 10_000 / 7);
        // Paging visits every match once.
        let mut seen = Vec::new();
        let mut from = 1;
        loop {
            let found = search_then_page(&f, &needle, from, 100, 0, 0).unwrap();
            seen.extend(found.matches.iter().map(|m| m.match_line));
            match found.matches.last() {
                Some(m) if found.has_more => from = m.match_line + 1,
                _ => break,
            }
        }
        assert_eq!(seen, expected);
    }

    #[test]
    fn case_folding_is_ascii_plus_the_query_case_forms() {
        let f = file_of("Ärger im Büro\nÄRGER\nstrasse\nSTRAẞE\nplain\n".as_bytes());
        let lines = |q: &str, cs: bool| -> Vec<u64> {
            matching_lines(&f, &Needle::new(q, cs), 1, 0, 10).unwrap().iter().map(|h| h.0).collect()
        };
        assert_eq!(lines("ärger", false), [1, 2]);
        assert_eq!(lines("äRGER", false), [1, 2]);
        assert_eq!(lines("ärger", true), Vec::<u64>::new());
        assert_eq!(lines("PLAIN", false), [5]);
        assert_eq!(lines("ß", false), Vec::<u64>::new(), "ß does not fold to ss");
        assert_eq!(lines("büro", false), [1]);
    }

    #[test]
    fn matches_across_block_boundaries_and_in_long_lines_are_found_once() {
        let mut text = vec![b'x'; BLOCK - 3];
        text.extend_from_slice(b"needle in a long line needle\nshort\nneedle\n");
        let f = file_of(&text);
        let hits = matching_lines(&f, &Needle::new("NEEDLE", false), 1, 0, 10).unwrap();
        assert_eq!(hits, [(1, 0), (3, BLOCK as u64 - 3 + 29 + 6)]);
        let found = search_then_page(&f, &Needle::new("needle", true), 1, 5, 1, 1).unwrap();
        assert_eq!(found.matches.len(), 2);
        assert_eq!(found.truncated, 1, "the long line is shown cut");
        assert_eq!((found.matches[1].start_line, found.matches[1].end_line), (2, 3));
    }
}
