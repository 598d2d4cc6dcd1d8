//! The Python package `clients/python` (distribution `chatmem`): its pytest suite
//! against real `chatmem serve` processes that the suite starts from this build's binary
//! (SQLite, and PostgreSQL when `CHATMEM_TEST_PG_URL` is set), then `mypy --strict`, `ruff
//! check` and `ruff format --check` on the package.
//!
//! The interpreter comes from the environment, as `.ci/run` sets it:
//! `CHATMEM_TEST_CLIENTS_PYTHON`, the venv's python that `bash clients/python/setup.sh`
//! prints. Without it the test says so and skips.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `python args…` from the repository root and asserts it exits 0, printing its output
/// either way (with `--nocapture`) and on failure in the panic.
fn run(python: &Path, what: &str, args: &[&str], mypy_cache: &Path) {
    let out: Output = Command::new(python)
        .args(args)
        .current_dir(repo_root())
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
fn python_package_tests_types_and_lints_pass() {
    let Some(python) = std::env::var_os("CHATMEM_TEST_CLIENTS_PYTHON").map(PathBuf::from) else {
        eprintln!(
            "skipping: CHATMEM_TEST_CLIENTS_PYTHON not set (the python of the venv \
             `bash clients/python/setup.sh` prints: \
             CHATMEM_TEST_CLIENTS_PYTHON=$(bash clients/python/setup.sh) cargo test -p chatmem-cli --test python_package)"
        );
        return;
    };
    if std::env::var_os("CHATMEM_TEST_PG_URL").is_none() {
        eprintln!("note: CHATMEM_TEST_PG_URL not set; the PostgreSQL half of the suite skips");
    }
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
