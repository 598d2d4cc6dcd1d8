//! The TypeScript package (`clients/typescript`, npm package `chatmem`) against this build's
//! `chatmem serve`: `npm test` there compiles it and runs its tests with Node's test runner
//! (the typed client checked against `/openapi.json`, the LangChain.js history in the
//! after-sale scenario, two writer processes, tenants, errors), each test file starting its
//! own server from `CHATMEM_BIN`, over SQLite and, with `CHATMEM_TEST_PG_URL`, PostgreSQL.
//!
//! It needs `CHATMEM_TEST_NODE` (a node binary, as `.ci/run` sets it) and the package's
//! dependencies (`npm ci` in `clients/typescript`); without them it says so and skips.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

fn package_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/typescript")
}

#[test]
fn npm_test_passes_against_this_build() {
    let Some(node) = std::env::var_os("CHATMEM_TEST_NODE") else {
        eprintln!("skipping: CHATMEM_TEST_NODE not set (a node binary; and `npm ci` in clients/typescript)");
        return;
    };
    let dir = package_dir();
    if !dir.join("node_modules").is_dir() {
        eprintln!("skipping: clients/typescript/node_modules is missing (run `npm ci` in clients/typescript)");
        return;
    }
    // npm, and the `node` that `npm test` runs, from the directory of CHATMEM_TEST_NODE first.
    let node_dir = Path::new(&node).parent().map(Path::to_path_buf).unwrap_or_default();
    let mut path = OsString::from(node_dir.as_os_str());
    if let Some(rest) = std::env::var_os("PATH") {
        path.push(":");
        path.push(rest);
    }
    let npm = Some(node_dir.join("npm"))
        .filter(|p| p.exists())
        .unwrap_or_else(|| "npm".into());
    let mut command = Command::new(npm);
    command
        .arg("test")
        .current_dir(&dir)
        .env("PATH", path)
        .env("CHATMEM_BIN", env!("CARGO_BIN_EXE_chatmem"))
        .env_remove("CHATMEM_URL")
        .env_remove("CHATMEM_TOKEN");
    match std::env::var_os("CHATMEM_TEST_PG_URL") {
        Some(url) => command.env("CHATMEM_TEST_PG_URL", url),
        None => command.env_remove("CHATMEM_TEST_PG_URL"),
    };
    let output = command.output().expect("run npm test in clients/typescript");
    assert!(
        output.status.success(),
        "npm test in clients/typescript failed ({})\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    // The runner's summary (counts only, never message text), for --nocapture.
    let stdout = String::from_utf8_lossy(&output.stdout);
    for line in stdout
        .lines()
        .filter(|l| l.starts_with("# ") && !l.starts_with("# Subtest"))
    {
        eprintln!("clients/typescript: {}", &line[2..]);
    }
}
