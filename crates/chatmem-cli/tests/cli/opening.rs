//! Which store a command opens, run as a user would: the commands that read or delete open an
//! existing store and create nothing, and a store URL the CLI does not know is shown as typed (a
//! password hidden) with the likely fix.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::{MYSQL, POSTGRES, refused};

/// Runs `chatmem` in `cwd`, with no store from the environment and the user's data
/// directory at `data` (where the default store lives).
fn chatmem_in(cwd: &Path, data: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_chatmem"))
        .args(args)
        .current_dir(cwd)
        .env_remove("CHATMEM_STORE")
        .env("XDG_DATA_HOME", data)
        .output()
        .expect("run chatmem")
}

/// Every file and directory under `dir`, sorted.
fn contents(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir") {
            let path = entry.expect("dir entry").path();
            found.push(path.display().to_string());
            if path.is_dir() {
                pending.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The commands that only read or delete, with `store` as their store.
fn reads(store: &str) -> [Vec<&str>; 8] {
    [
        vec!["get", "--conversation", "c"],
        vec!["history", "--conversation", "c"],
        vec!["recall", "--conversation", "c", "--k", "3", "hello"],
        vec!["list"],
        vec!["export"],
        vec!["export", "--conversation", "c", "--output", "out.jsonl"],
        vec!["clear", "--conversation", "c"],
        vec!["purge"],
    ]
    .map(|mut args| {
        if !store.is_empty() {
            args.extend(["--store", store]);
        }
        args
    })
}

#[test]
fn reading_a_missing_sqlite_file_is_an_error_naming_it_and_creates_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&data).expect("data dir");
    std::fs::create_dir_all(&work).expect("work dir");
    let in_missing_dir = work.join("no").join("such").join("x.db");
    let absolute = format!("sqlite:{}", in_missing_dir.display());
    let shown = in_missing_dir.display().to_string();
    for (store, path) in [
        (absolute.as_str(), shown.as_str()),
        ("sqlite:typo.db", "typo.db"),
        ("sqlite:typo.db?mode=ro", "typo.db"),
        ("sqlite://nested/typo.db", "nested/typo.db"),
    ] {
        for args in reads(store) {
            let out = chatmem_in(&work, &data, &args);
            refused(&out, &args, &[&format!("no SQLite store at {path}:")]);
            assert_eq!(
                contents(dir.path()),
                [data.display().to_string(), work.display().to_string()],
                "{args:?}"
            );
        }
    }
    // The default store (in the user's data directory) is no exception.
    let default = data.join("chatmem").join("chatmem.db");
    for args in reads("") {
        let out = chatmem_in(&work, &data, &args);
        refused(&out, &args, &[&format!("no SQLite store at {}:", default.display())]);
        assert!(contents(&data).is_empty(), "{args:?}: {:?}", contents(&data));
    }
    // A command that writes still creates the store, and the reads then work.
    let add = Command::new(env!("CARGO_BIN_EXE_chatmem"))
        .args(["add", "--conversation", "c", "--store", "sqlite:new/typo.db"])
        .current_dir(&work)
        .env_remove("CHATMEM_STORE")
        .stdin(std::fs::File::open(write_messages(&work)).expect("messages"))
        .output()
        .expect("run chatmem add");
    assert!(add.status.success(), "{}", String::from_utf8_lossy(&add.stderr));
    for args in reads("sqlite:new/typo.db") {
        let out = chatmem_in(&work, &data, &args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(work.join("out.jsonl").is_file());
}

/// A file of one message to add, in `dir`.
fn write_messages(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("messages.json");
    std::fs::write(&path, r#"[{"role":"user","content":"hello"}]"#).expect("write messages");
    path
}

#[test]
fn an_unknown_store_url_is_shown_as_typed_with_the_fix() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (store, said) in [
        (
            "data/x.db",
            &["unknown store URL \"data/x.db\"", "did you mean sqlite:data/x.db?"][..],
        ),
        ("ftp://host/x", &["unknown store URL \"ftp://host/x\""]),
        // The colon belongs to the scheme: bare names are refused alike, with the fix.
        ("memory", &["unknown store URL \"memory\"", "did you mean memory:?"]),
        ("sqlite", &["unknown store URL \"sqlite\"", "did you mean sqlite:PATH?"]),
    ] {
        for command in [&["list"][..], &["get", "--conversation", "c"], &["purge"]] {
            let mut args = command.to_vec();
            args.extend(["--store", store]);
            let out = chatmem_in(dir.path(), dir.path(), &args);
            refused(&out, &args, said);
        }
    }
    assert!(contents(dir.path()).is_empty(), "{:?}", contents(dir.path()));
    // `memory:` itself is a store.
    let out = chatmem_in(dir.path(), dir.path(), &["list", "--store", "memory:"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn an_unknown_store_url_hides_only_its_password() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (store, shown) in [
        ("mssql://app:s3cret@db/x", "\"mssql://app:***@db/x\""),
        (
            "mssql://db/x?password=s3cret&ssl=1",
            "\"mssql://db/x?password=***&ssl=1\"",
        ),
        ("host=db user=app password=s3cret", "\"host=db user=app password=***\""),
        ("app:s3cret@db/x", "\"app:***@db/x\""),
    ] {
        let args = ["get", "--conversation", "c", "--store", store];
        let out = chatmem_in(dir.path(), dir.path(), &args);
        let err = refused(&out, &args, &["unknown store URL", shown]);
        assert!(!err.contains("s3cret"), "{store} leaked: {err}");
    }
}

/// A read through PostgreSQL creates no tables: in a database without chatmem's schema it
/// is an error saying so, and the database stays empty.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_PG_URL"]
async fn reading_postgres_creates_no_schema() {
    let url = POSTGRES.url();
    let (admin, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect to CHATMEM_TEST_PG_URL");
    tokio::spawn(connection);
    let database = format!("chatmem_cli_read_{:016x}", fastrand::u64(..));
    admin
        .batch_execute(&format!("CREATE DATABASE {database}"))
        .await
        .expect("create a database");
    let Some((server, _)) = url.rsplit_once('/') else {
        panic!("CHATMEM_TEST_PG_URL has no database: {url}");
    };
    let store = format!("{server}/{database}");
    let dir = tempfile::tempdir().expect("tempdir");
    for args in reads(&store) {
        let out = chatmem_in(dir.path(), dir.path(), &args);
        refused(&out, &args, &["no chatmem tables", &database]);
    }
    let (client, connection) = tokio_postgres::connect(&store, tokio_postgres::NoTls)
        .await
        .expect("connect to the new database");
    let task = tokio::spawn(connection);
    let tables: i64 = client
        .query_one("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'chatmem%'", &[])
        .await
        .expect("count tables")
        .get(0);
    drop(client);
    let _ = task.await;
    admin
        .batch_execute(&format!("DROP DATABASE {database}"))
        .await
        .expect("drop the database");
    assert_eq!(tables, 0, "a read created tables");
}

/// A read through MySQL creates no tables: in a database without chatmem's tables it is an
/// error saying so, and the database stays empty.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs CHATMEM_TEST_MYSQL_URL"]
async fn reading_mysql_creates_no_tables() {
    use mysql_async::prelude::Queryable;
    let url = MYSQL.url();
    let opts = mysql_async::Opts::from_url(&url).expect("CHATMEM_TEST_MYSQL_URL parses");
    let mut admin = mysql_async::Conn::new(opts)
        .await
        .expect("connect to CHATMEM_TEST_MYSQL_URL");
    let database = format!("chatmem_cli_read_{:012x}", fastrand::u64(..) >> 16);
    admin
        .query_drop(format!("CREATE DATABASE {database}"))
        .await
        .expect("create a database");
    let Some((server, _)) = url.split('?').next().and_then(|u| u.rsplit_once('/')) else {
        panic!("CHATMEM_TEST_MYSQL_URL has no database: {url}");
    };
    let store = format!("{server}/{database}");
    let dir = tempfile::tempdir().expect("tempdir");
    for args in reads(&store) {
        let out = chatmem_in(dir.path(), dir.path(), &args);
        refused(&out, &args, &["no chatmem tables", &database]);
    }
    let tables: Option<i64> = admin
        .exec_first(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ?",
            (&database,),
        )
        .await
        .expect("count tables");
    admin
        .query_drop(format!("DROP DATABASE {database}"))
        .await
        .expect("drop the database");
    assert_eq!(tables, Some(0), "a read created tables");
}
