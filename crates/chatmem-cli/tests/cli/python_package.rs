//! The Python package `clients/python` (distribution `chatmem`): its pytest suite
//! against real `chatmem serve` processes that the suite starts from this build's binary
//! (SQLite, and PostgreSQL at `CHATMEM_TEST_PG_URL`), then `mypy --strict`, `ruff check` and
//! `ruff format --check` on the package.
//!
//! The interpreter comes from the environment, as `.ci/run` sets it:
//! `CHATMEM_TEST_CLIENTS_PYTHON`, the venv's python that `bash clients/python/setup.sh`
//! prints. Without both variables the test is ignored (`cargo test -p chatmem-cli --test cli
//! python_package -- --include-ignored` runs it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::{POSTGRES, repo_path};

/// Runs `python args…` from the repository root and asserts it exits 0, printing its output
/// either way (with `--nocapture`) and on failure in the panic.
fn run(python: &Path, what: &str, args: &[&str], mypy_cache: &Path) {
    let out: Output = Command::new(python)
        .args(args)
        .current_dir(repo_path(""))
        .env("CHATMEM_BIN", env!("CARGO_BIN_EXE_chatmem"))
        .env("MYPY_CACHE_DIR", mypy_cache)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("NO_PROXY", "127.0.0.1,localhost") // loopback never goes through a proxy
        .env("no_proxy", "127.0.0.1,localhost")
        .env("LANGSMITH_TRACING", "false") // LangChain sends nothing anywhere else
        .env_remove("CHATMEM_URL")
        .env_remove("CHATMEM_TOKEN")
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", python.display()));
    let printed = format!(
        "{what}: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{printed}");
    assert!(out.status.success(), "{printed}");
}

#[test]
#[ignore = "needs CHATMEM_TEST_CLIENTS_PYTHON and CHATMEM_TEST_PG_URL"]
fn python_package_tests_types_and_lints_pass() {
    let python = PathBuf::from(chatmem_test::required_env(
        "CHATMEM_TEST_CLIENTS_PYTHON",
        "make the package's venv (`bash clients/python/setup.sh` prints its python)",
    ));
    // The suite's PostgreSQL half reads it from the environment, which the suite inherits.
    POSTGRES.url();
    let cache = tempfile::tempdir().expect("tempdir");
    let package = "clients/python";
    run(
        &python,
        "pytest",
        &["-m", "pytest", "-q", "clients/python/tests"],
        cache.path(),
    );
    run(
        &python,
        "mypy --strict",
        &[
            "-m",
            "mypy",
            "--strict",
            "--config-file",
            "clients/python/pyproject.toml",
            "clients/python/src",
            "clients/python/tests",
        ],
        cache.path(),
    );
    run(
        &python,
        "ruff check",
        &["-m", "ruff", "check", "--no-cache", package],
        cache.path(),
    );
    run(
        &python,
        "ruff format --check",
        &["-m", "ruff", "format", "--check", "--no-cache", package],
        cache.path(),
    );
}
