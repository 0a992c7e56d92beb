//! `rw_validate`: each format valid and invalid with line and column, format resolution, the
//! reference's bug 28 fixes, and that nothing is written.

use serde_json::{Value, json};

use crate::support::mcp::Mcp;

/// Validate `content` as `hint`, returning the success payload.
fn check(mcp: &Mcp, content: &str, hint: &str) -> Value {
    mcp.call("rw_validate", json!({"content": content, "format_hint": hint})).ok()
}

/// The (line, col, severity) of each listed finding.
fn places(out: &Value) -> Vec<(u64, Option<u64>, String)> {
    out["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["line"].as_u64().unwrap(), e["col"].as_u64(), e["severity"].as_str().unwrap().to_string()))
        .collect()
}

fn error_at(line: u64, col: u64) -> Vec<(u64, Option<u64>, String)> {
    vec![(line, Some(col), "error".to_string())]
}

#[test]
fn each_format_reports_valid_content_as_ok() {
    let mcp = Mcp::start();
    for (hint, content) in [
        ("latex", "\\documentclass{article}\n\\begin{document}\nHi $x_1$.\n\\end{document}\n"),
        ("json", "{\"a\": [1, 2, {\"b\": null}]}"),
        ("python", "def f(x: int) -> int:\n    return x + 1\n"),
        ("yaml", "a: 1\nlist:\n  - x\n  - y\n"),
        ("toml", "[package]\nname = \"x\"\nversion = \"0.1.0\"\n"),
        ("markdown", "---\ntitle: x\n---\n# Title\n"),
    ] {
        let out = check(&mcp, content, hint);
        assert_eq!(out["valid"], true, "{hint}: {out}");
        assert_eq!(out["format"], hint);
        assert_eq!(out["errors"], json!([]));
        assert_eq!(out["summary"], format!("{hint}: ok"));
        assert_eq!(out["checked"], true);
    }
}

#[test]
fn each_format_reports_its_error_with_line_and_column() {
    let mcp = Mcp::start();
    for (hint, content, line, col) in [
        ("json", "{\n  \"key\": }\n", 2, 10),
        ("python", "x = 1\ndef f(:\n    pass\n", 2, 7),
        ("yaml", "a: 1\nb: [1, 2\n", 2, 4),
        ("toml", "a = 1\nb = \n", 2, 5),
        ("latex", "\\documentclass{article}\n\\begin{document}\nx } y\n\\end{document}\n", 3, 3),
        ("markdown", "---\ntitle: ok\ntags: [a, b\n---\nbody\n", 3, 7),
    ] {
        let out = check(&mcp, content, hint);
        assert_eq!(out["ok"], true);
        assert_eq!(out["valid"], false, "{hint}: {out}");
        assert_eq!(places(&out), error_at(line, col), "{hint}: {out}");
        assert_eq!(out["summary"], format!("{hint}: 1 error(s)"));
        assert!(!out["errors"][0]["message"].as_str().unwrap().is_empty());
    }
}

#[test]
fn latex_warnings_keep_the_document_valid_and_the_reference_summary() {
    let mcp = Mcp::start();
    let out = check(&mcp, "{hello", "latex");
    assert_eq!(out["valid"], false);
    assert_eq!(out["summary"], "latex: 1 error(s), 3 warning(s)");
    let out = check(&mcp, "\\being{document}\nfoo_bar\n", "latex");
    assert_eq!(out["valid"], true);
    assert_eq!(out["summary"], "latex: 5 warning(s)");
    let messages: Vec<&str> =
        out["errors"].as_array().unwrap().iter().map(|e| e["message"].as_str().unwrap()).collect();
    assert!(messages.contains(&"Probable typo: \\being (did you mean \\begin?)"), "{messages:?}");
    assert!(messages.contains(&"Unescaped '_' outside math mode (use \\_)"), "{messages:?}");
}

#[test]
fn the_format_comes_from_the_hint_then_the_extension_then_the_content() {
    let mcp = Mcp::start();
    let out = mcp.call("rw_validate", json!({"content": "def foo(): pass", "target_path": "pkg/foo.py"})).ok();
    assert_eq!(out["format"], "python");
    let out = mcp.call("rw_validate", json!({"content": "a = 1\n", "target_path": "Cargo.toml"})).ok();
    assert_eq!(out["format"], "toml");
    let out = mcp.call("rw_validate", json!({"content": "{\"auto\": true}"})).ok();
    assert_eq!((out["format"].as_str(), out["valid"].as_bool()), (Some("json"), Some(true)));
    let out =
        mcp.call("rw_validate", json!({"content": "a = 1\n", "format_hint": "toml", "target_path": "x.json"})).ok();
    assert_eq!(out["format"], "toml");
    let out = mcp.call("rw_validate", json!({"content": "just plain text"})).ok();
    assert_eq!(out["format"], "unknown");
    assert_eq!(out["valid"], true);
    assert_eq!(out["errors"], json!([]));
    assert_eq!(out["summary"], "unknown: ok");
}

#[test]
fn markdown_front_matter_is_not_taken_for_yaml_reference_bug_28() {
    let mcp = Mcp::start();
    let post = "---\ntitle: A post\n---\n# Heading\n\nSome prose: with a colon.\n";
    let out = mcp.call("rw_validate", json!({"content": post})).ok();
    assert_eq!(out["format"], "markdown");
    assert_eq!(out["valid"], true, "{out}");
    let out = mcp.call("rw_validate", json!({"content": post, "target_path": "blog/post.md"})).ok();
    assert_eq!((out["format"].as_str(), out["valid"].as_bool()), (Some("markdown"), Some(true)));
}

#[test]
fn latex_escapes_comments_verbatim_and_keys_are_understood_reference_bug_28() {
    let mcp = Mcp::start();
    let doc = "\\documentclass{article}\n\\begin{document}\n\
               A set \\{x\\} costs 5\\%. % a } in a comment\n\
               \\begin{verbatim}\nint a_b = f({);\n\\end{verbatim}\n\
               \\verb|}{| see \\ref{sec_intro} and \\cite{knuth_84}, \\input{my_file}, \\url{http://x.org/a_b%20}\n\
               \\label{fig_a}\n\\end{document}\n";
    let out = check(&mcp, doc, "latex");
    assert_eq!(out["valid"], true, "{out}");
    assert_eq!(out["errors"], json!([]), "{out}");
    assert_eq!(out["summary"], "latex: ok");
}

#[test]
fn unknown_hints_check_nothing_and_say_so_reference_bug_28() {
    let mcp = Mcp::start();
    let out = check(&mcp, "<a/>", "xml");
    assert_eq!(out["format"], "unknown");
    assert_eq!(out["valid"], true);
    assert_eq!(out["checked"], false);
    let note = out["warnings"][0].as_str().unwrap();
    assert!(note.contains("xml") && note.contains("nothing was checked"), "{note}");
}

#[test]
fn validate_writes_nothing_and_is_listed_read_only() {
    let mcp = Mcp::start();
    let before = mcp.ws.rows().len();
    mcp.call("rw.validate", json!({"content": "{}", "target_path": "out.json"})).ok();
    assert_eq!(mcp.ws.rows().len(), before);
    assert!(mcp.ws.read("out.json").is_none());
    let tool = mcp.tools_json().into_iter().find(|t| t["name"] == "rw_validate").expect("rw_validate is listed");
    assert_eq!(tool["annotations"]["readOnlyHint"], true);
    assert_eq!(tool["inputSchema"]["required"], json!(["content"]));
    let env = mcp.call("rw_validate", json!({"content": "{}", "bogus": 1})).err();
    assert_eq!(env["context"]["reason"], "invalid_arguments");
}

/// Issue 16, item 6: a macro used but defined neither in the document nor by LaTeX or a common
/// package (the paper's `\layer`) is a warning at its first use, with line and column.
#[test]
fn latex_flags_macros_used_but_never_defined() {
    let mcp = Mcp::start();
    let body = "The \\model{} has six \\layer{}s; $\\rank A \\le \\alpha$. \\drafttrue\\ifdraft x\\fi";
    let doc = format!(
        "\\documentclass{{article}}\n\\usepackage{{amsmath}}\n\\newcommand{{\\model}}{{RW}}\n\
         \\DeclareMathOperator{{\\rank}}{{rank}}\n\\newif\\ifdraft\n\\begin{{document}}\n{body}\n\
         Again: \\layer.\n\\end{{document}}\n"
    );
    let out = check(&mcp, &doc, "latex");
    assert_eq!(out["valid"], true, "{out}");
    assert_eq!(out["summary"], "latex: 1 warning(s)", "{out}");
    let col = body.find("\\layer").unwrap() as u64 + 1;
    assert_eq!(places(&out), [(7, Some(col), "warning".to_string())], "{out}");
    let message = out["errors"][0]["message"].as_str().unwrap();
    assert!(message.contains("\\layer") && message.contains("not defined"), "{message}");

    let defined = doc.replace("\\newif", "\\newcommand{\\layer}{layer}\n\\newif");
    assert_eq!(check(&mcp, &defined, "latex")["summary"], "latex: ok");
}
