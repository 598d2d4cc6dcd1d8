//! The SQLite store's integration tests, one binary: the conformance suite, crash and
//! restart durability, errors, users' facts, the recall index, and many processes writing
//! one database file.
//!
//! The tests across processes re-run this binary with an exact filter naming their child
//! test by its module path (e.g. `stress::stress_child`).

mod conformance;
mod durability;
mod errors;
mod facts;
mod recall;
mod stress;
