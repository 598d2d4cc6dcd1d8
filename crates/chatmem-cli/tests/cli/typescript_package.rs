//! The TypeScript package (`clients/typescript`, npm package `chatmem`) against this build's
//! `chatmem serve`: `npm test` there compiles it and runs its tests with Node's test runner
//! (the typed client checked against `/openapi.json`, the LangChain.js history in the
//! after-sale scenario, two writer processes, tenants, errors), each test file starting its
//! own server from `CHATMEM_BIN`, over SQLite and PostgreSQL.
//!
//! It needs `CHATMEM_TEST_NODE` (a node binary, as `.ci/run` sets it), the package's
//! dependencies (`npm ci` in `clients/typescript`) and `CHATMEM_TEST_PG_URL`; without the
//! variables it is ignored.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

use crate::support::{POSTGRES, repo_path};

#[test]
#[ignore = "needs CHATMEM_TEST_NODE and CHATMEM_TEST_PG_URL"]
fn npm_test_passes_against_this_build() {
    let node = chatmem_test::required_env(
        "CHATMEM_TEST_NODE",
        "name a node binary (after `npm ci` in clients/typescript)",
    );
    let pg_url = POSTGRES.url();
    let dir = repo_path("clients/typescript");
    assert!(
        dir.join("node_modules").is_dir(),
        "CHATMEM_TEST_NODE is set but clients/typescript/node_modules is missing: run `npm ci` in clients/typescript"
    );
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
    let mut command = Command::new(&npm);
    command
        .arg("test")
        .current_dir(&dir)
        .env("PATH", &path)
        .env("CHATMEM_BIN", env!("CARGO_BIN_EXE_chatmem"))
        .env_remove("CHATMEM_URL")
        .env_remove("CHATMEM_TOKEN")
        .env("CHATMEM_TEST_PG_URL", pg_url);
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

    // A project that installs the folder (a link, as `npm install ./clients/typescript` makes)
    // can import it: the install builds it, from a checkout without dist/. After `npm test`,
    // not beside it: both write dist/.
    std::fs::remove_dir_all(dir.join("dist")).expect("remove the build npm test made");
    let project = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        project.path().join("package.json"),
        r#"{"name": "app", "type": "module"}"#,
    )
    .expect("write package.json");
    let npm_in_project = |args: &[&std::ffi::OsStr]| {
        let output = Command::new(&npm)
            .args(args)
            .current_dir(project.path())
            .env("PATH", &path)
            .output()
            .expect("run npm");
        assert!(
            output.status.success(),
            "npm {args:?} failed ({})\n--- stdout\n{}\n--- stderr\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    };
    npm_in_project(&[
        "install".as_ref(),
        "--no-audit".as_ref(),
        "--no-fund".as_ref(),
        dir.as_os_str(),
    ]);
    let imported = Command::new(&node)
        .args([
            "--input-type=module",
            "-e",
            "const m = await import('chatmem'); console.log(typeof m.ChatmemClient)",
        ])
        .current_dir(project.path())
        .output()
        .expect("run node");
    assert_eq!(
        String::from_utf8_lossy(&imported.stdout).trim(),
        "function",
        "import('chatmem') in a project that installed the folder: {}",
        String::from_utf8_lossy(&imported.stderr)
    );
}
